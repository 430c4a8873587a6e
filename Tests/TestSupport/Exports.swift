// Namespaces, veth topologies and subprocesses live in NetlinkProbe so tools can use them too.
@_exported import NetlinkProbe
