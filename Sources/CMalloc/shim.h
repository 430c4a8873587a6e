#ifndef SYNCD_CMALLOC_SHIM_H
#define SYNCD_CMALLOC_SHIM_H

// glibc's allocator controls (mallopt, malloc_trim), which Swift's Glibc module leaves out.
#include <malloc.h>

#endif
