#!/usr/bin/python3
"""A stand-in NetworkManager on a private D-Bus bus, for NetworkManagerWatcherTests.

It shares no code with syncd: python3-dbus on a GLib main loop, exporting the part of
NetworkManager's D-Bus API the watcher reads, the way NetworkManager itself does.

    fake_networkmanager.py BUS_ADDRESS [NAME=METERED ...]

The devices on the command line exist before the name is taken, as NetworkManager exports its
objects before it owns org.freedesktop.NetworkManager. METERED is a number (NMMetered, sent as
`u`) or `s:TEXT` (sent as a string: the wrong type). Prints `ready` once it owns the name.

Then it obeys lines on standard input, answering `ok` (or `error: ...`) to each:

    add NAME METERED       a new device object, DeviceAdded
    set NAME METERED       its Metered changes, PropertiesChanged
    rename NAME NEW        its Interface changes, PropertiesChanged
    remove NAME            its object goes, DeviceRemoved
    quit                   leaves the bus and exits (so does the end of standard input)

NAME and NEW may use Python's backslash escapes (`eth\\x01`), for names no kernel would allow.
"""

import os
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

SERVICE = "org.freedesktop.NetworkManager"
MANAGER_PATH = "/org/freedesktop/NetworkManager"
MANAGER = "org.freedesktop.NetworkManager"
DEVICE = "org.freedesktop.NetworkManager.Device"
PROPERTIES = "org.freedesktop.DBus.Properties"


def unknown_property(interface, name):
    return dbus.exceptions.DBusException(
        "no property %s.%s" % (interface, name), name="org.freedesktop.DBus.Error.UnknownProperty"
    )


def metered_value(text):
    if text.startswith("s:"):
        return dbus.String(text[2:], variant_level=1)
    return dbus.UInt32(int(text), variant_level=1)


def unescape(text):
    return text.encode("utf-8").decode("unicode_escape")


class Device(dbus.service.Object):
    """One org.freedesktop.NetworkManager.Device object."""

    def __init__(self, connection, path, name, metered):
        super().__init__(connection, path)
        self.path = path
        # More than the watcher reads, as NetworkManager's own GetAll answers.
        self.properties = {
            "Udi": dbus.String("/sys/devices/virtual/net/" + name, variant_level=1),
            "Interface": dbus.String(name, variant_level=1),
            "DeviceType": dbus.UInt32(1, variant_level=1),
            "State": dbus.UInt32(100, variant_level=1),
            "Metered": metered,
            "Managed": dbus.Boolean(True, variant_level=1),
        }

    @dbus.service.method(PROPERTIES, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        if interface != DEVICE or name not in self.properties:
            raise unknown_property(interface, name)
        return self.properties[name]

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        # A NetworkManager busy at boot: each device's answer takes this long.
        time.sleep(SLOW[0])
        if interface != DEVICE:
            return dbus.Dictionary({}, signature="sv")
        return dbus.Dictionary(self.properties, signature="sv")

    @dbus.service.signal(PROPERTIES, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass

    def change(self, name, value):
        self.properties[name] = value
        self.PropertiesChanged(DEVICE, dbus.Dictionary({name: value}, signature="sv"), dbus.Array([], signature="s"))

    @property
    def interface_name(self):
        return str(self.properties["Interface"])


class Manager(dbus.service.Object):
    """The org.freedesktop.NetworkManager object and its devices."""

    def __init__(self, connection):
        super().__init__(connection, MANAGER_PATH)
        self.bus_connection = connection
        self.devices = []
        self.next_index = 1

    def paths(self):
        return dbus.Array([device.path for device in self.devices], signature="o")

    def find(self, name):
        for device in self.devices:
            if device.interface_name == name:
                return device
        raise KeyError("no device named %r" % name)

    def add(self, name, metered, announce):
        path = "%s/Devices/%d" % (MANAGER_PATH, self.next_index)
        self.next_index += 1
        device = Device(self.bus_connection, path, name, metered)
        self.devices.append(device)
        if announce:
            self.DeviceAdded(path)
            self.PropertiesChanged(MANAGER, dbus.Dictionary({"Devices": self.paths()}, signature="sv"), dbus.Array([], signature="s"))

    def remove(self, name):
        device = self.find(name)
        self.devices.remove(device)
        device.remove_from_connection()
        self.DeviceRemoved(device.path)
        self.PropertiesChanged(MANAGER, dbus.Dictionary({"Devices": self.paths()}, signature="sv"), dbus.Array([], signature="s"))

    @dbus.service.method(MANAGER, in_signature="", out_signature="ao")
    def GetDevices(self):
        return self.paths()

    @dbus.service.method(PROPERTIES, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        if interface != MANAGER or name != "Devices":
            raise unknown_property(interface, name)
        return dbus.Array(self.paths(), signature="o", variant_level=1)

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != MANAGER:
            return dbus.Dictionary({}, signature="sv")
        return dbus.Dictionary({"Devices": dbus.Array(self.paths(), signature="o", variant_level=1)}, signature="sv")

    @dbus.service.signal(MANAGER, signature="o")
    def DeviceAdded(self, path):
        pass

    @dbus.service.signal(MANAGER, signature="o")
    def DeviceRemoved(self, path):
        pass

    @dbus.service.signal(PROPERTIES, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass


SLOW = [0.0]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: fake_networkmanager.py BUS_ADDRESS [--slow=SECONDS] [NAME=METERED ...]")
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    connection = dbus.bus.BusConnection(sys.argv[1])
    manager = Manager(connection)
    arguments = sys.argv[2:]
    if arguments and arguments[0].startswith("--slow="):
        SLOW[0] = float(arguments.pop(0)[len("--slow="):])
    for argument in arguments:
        name, _, metered = argument.partition("=")
        manager.add(unescape(name), metered_value(metered), announce=False)
    # Held for as long as the process runs: the name goes with the object.
    name = dbus.service.BusName(SERVICE, bus=connection, do_not_queue=True)
    loop = GLib.MainLoop()
    pending = bytearray()

    def obey(line):
        words = line.split()
        if not words:
            return
        command, arguments = words[0], words[1:]
        if command == "add":
            manager.add(unescape(arguments[0]), metered_value(arguments[1]), announce=True)
        elif command == "set":
            manager.find(unescape(arguments[0])).change("Metered", metered_value(arguments[1]))
        elif command == "rename":
            manager.find(unescape(arguments[0])).change("Interface", dbus.String(unescape(arguments[1]), variant_level=1))
        elif command == "remove":
            manager.remove(unescape(arguments[0]))
        elif command == "quit":
            loop.quit()
        else:
            raise ValueError("unknown command %r" % command)

    def on_input(fd, condition):
        data = os.read(fd, 4096)
        if not data:
            loop.quit()
            return False
        pending.extend(data)
        while b"\n" in pending:
            index = pending.index(b"\n")
            line = pending[:index].decode("utf-8")
            del pending[: index + 1]
            try:
                obey(line)
                print("ok", flush=True)
            except Exception as error:  # Reported to the test, which fails on it.
                print("error: %s" % error, flush=True)
        return True

    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP | GLib.IO_ERR, on_input)
    print("ready", flush=True)
    loop.run()
    del name
    connection.close()


if __name__ == "__main__":
    main()
