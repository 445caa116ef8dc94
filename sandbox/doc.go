// Package sandbox owns the operating-system boundary around the terminal
// tool's commands: the policy (Mode, network, writable roots), the Spec of
// one command, and its Linux enforcement in a helper entry of the running
// binary itself.
//
// A sandboxed command is started as "/proc/self/exe __sandbox-exec SPEC
// COMMAND" (the running image, never a path name) in its own process
// group and, as root, private mount and PID namespaces; not root, the
// helper re-executes itself once more in new user, mount and PID
// namespaces mapping the caller's uid and gid to themselves. The helper,
// run from this package's init before main, waits for the caller's gate
// on fd 3 when Spec.Gate is set (EOF: exit 125 without running anything),
// then stays PID 1 of the namespace (reaping, forwarding signals, a 1 s
// grace after the shell exits; its exit ends every leftover) and starts
// "__sandbox-exec-run SPEC COMMAND", which:
//
//  1. opens the cwd, the temp directory and the writable roots without
//     following symlinks (refused, exit 126, when one has appeared since
//     the real paths were stored);
//  2. makes every mount private, hides or freezes the protected
//     directories (Spec.Protected: the daemon's home and every home in the
//     registry, see RegisterHome): an empty read-only tmpfs over the whole
//     directory when no writable location lies in it, else a read-only
//     tmpfs view of it with its entries bound read-only and the covered
//     files as empty files of its own; mounts a fresh /proc;
//  3. drops every capability from the bounding, ambient, inheritable,
//     permitted and effective sets (root included) and sets no_new_privs;
//  4. applies Landlock: read and execute everywhere, writes only under the
//     writable locations, TCP bind/connect refused when the network is
//     off (ABI 4+), signals and abstract Unix sockets scoped to the
//     sandbox (ABI 6+);
//  5. loads a seccomp filter that kills any foreign-architecture or x32
//     system call, then, when the network is off, one that refuses
//     socket(2) for any family but AF_UNIX, and io_uring;
//  6. marks every descriptor above 2 close-on-exec and execs /bin/sh -c.
//
// The package imports nothing of sessiond: its callers (tools) pass paths.
// It must not decide what is approved; it only confines.
package sandbox
