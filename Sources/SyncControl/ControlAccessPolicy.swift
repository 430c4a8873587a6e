#if canImport(Glibc)
import Glibc
#endif
import Varlink

/// Who may call the methods that change state.
///
/// Root and members of the control group (as primary or supplementary group of the calling
/// process, read from the kernel with `SO_PEERCRED`/`SO_PEERGROUPS` at connect time). Everyone
/// else may read: the socket is mode 0666 on purpose, because status is no secret on the
/// machine and `syncctl status` should work for every user, like `networkctl status`.
public struct ControlAccessPolicy: Sendable, Hashable {
    /// Groups whose members may change state, besides root.
    public var privilegedGroups: Set<UInt32>

    /// A policy for root and the members of `privilegedGroups` (gids).
    public init(privilegedGroups: Set<UInt32> = []) {
        self.privilegedGroups = privilegedGroups
    }

    /// Resolves a group name (or numeric gid); an unknown group grants nothing beyond root.
    public init(groupName: String?) {
        guard let groupName, let gid = Self.groupID(named: groupName) else {
            self.init()
            return
        }
        self.init(privilegedGroups: [gid])
    }

    /// Whether `peer` (credentials from the kernel) may call Refresh, LoadOlder and Retry.
    public func mayChangeState(_ peer: VarlinkPeer) -> Bool {
        peer.uid == 0 || privilegedGroups.contains { peer.isMember(of: $0) }
    }

    /// The gid of a group from the user database, or the number itself.
    public static func groupID(named name: String) -> UInt32? {
        if let number = UInt32(name) { return number }
        var group = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        let status = getgrnam_r(name, &group, &buffer, buffer.count, &result)
        guard status == 0, result != nil else { return nil }
        return group.gr_gid
    }
}
