// Package sandbox owns the operating-system boundary around the terminal
// tool's commands: the policy (Mode, network, writable roots), the Spec of
// one command, and its Linux enforcement in a helper entry of the running
// binary itself.
//
// A sandboxed command is started as "THIS-BINARY __sandbox-exec SPEC
// COMMAND" in its own process group and, as root, a private mount
// namespace; not root, the helper re-executes itself once more in new user
// and mount namespaces mapping the caller's uid and gid to themselves. The
// helper, run from this package's init before main, then:
//
//  1. waits for the caller's gate on fd 3 when Spec.Gate is set (EOF: exit
//     125 without running anything);
//  2. makes every mount private, hides or freezes the protected
//     directories (Spec.Protected: the daemon's home) with read-only bind
//     mounts, an empty read-only file over each covered file, or an empty read-only
//     tmpfs over the whole directory when no writable location lies in it;
//  3. drops every capability from the bounding, ambient, inheritable,
//     permitted and effective sets (root included) and sets no_new_privs;
//  4. applies Landlock: read and execute everywhere, writes only under the
//     writable locations, TCP bind/connect refused when the network is
//     off (ABI 4+), signals and abstract Unix sockets scoped to the
//     sandbox (ABI 6+);
//  5. loads a seccomp filter that refuses socket(2) for any family but
//     AF_UNIX, and io_uring, when the network is off;
//  6. marks every descriptor above 2 close-on-exec and execs /bin/sh -c.
//
// The package imports nothing of sessiond: its callers (tools) pass paths.
// It must not decide what is approved; it only confines.
package sandbox
