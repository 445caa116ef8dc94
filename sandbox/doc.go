// Package sandbox owns the operating-system boundary around the terminal
// tool's commands: the policy (Mode, network, writable and readable
// roots), the Spec of
// one command, and its Linux enforcement in a helper entry of the running
// binary itself.
//
// A sandboxed command is started as "/proc/self/exe __sandbox-exec SPEC
// COMMAND" (the running image, never a path name) in its own process
// group and, as root, private mount, PID and IPC namespaces; not root, the
// helper re-executes itself once more in new user, mount, PID and IPC
// namespaces mapping the caller's uid and gid to themselves. The helper,
// run from this package's init before main, waits for the caller's gate
// on fd 3 when Spec.Gate is set (EOF: exit 125 without running anything),
// then, as PID 1 of the namespace, confines one OS thread of its own and
// forks the shell from it (one program image per command, no second exec
// of this binary):
//
//  1. opens the cwd, the temp directory and the writable roots without
//     following symlinks (refused, exit 126, when one has appeared since
//     the real paths were stored), and plans the view in the old root
//     (makePlan): the sources to bind, each opened the same way, and the
//     targets to cover (Spec.Protected, Spec.HiddenFiles) with their
//     inode and their file system's identity from mountinfo;
//  2. builds the view (buildView, view_linux.go): a tmpfs root it
//     pivot_roots into, holding only binds of what the command may use
//     (SystemTrees, the home without CredentialStores, readable roots and
//     $PATH roots read-only; the cwd and writable roots read-write; a
//     private /tmp; a minimal /dev; a fresh /proc), every mount nosuid,
//     nodev and read-only at the mount level outside the writable
//     locations; keeps .git/config, .git/hooks and the home's
//     StartupFiles read-only; covers the targets wherever they show (at
//     their path, through aliases found in mountinfo), the credential
//     stores and SystemSecrets. Every mount is made by descriptor
//     (mountfd_linux.go: open_tree, mount_setattr, move_mount onto targets
//     opened with RESOLVE_NO_SYMLINKS), so a concurrent command cannot
//     redirect one; any error fails closed;
//  3. drops every capability from the bounding, ambient, inheritable,
//     permitted and effective sets (root included) and sets no_new_privs;
//  4. applies Landlock: read and execute everywhere in the view, writes
//     only in the writable locations (granted by checked descriptors),
//     /tmp and the devices, TCP bind/connect refused when the network is
//     off (ABI 4+), signals and abstract Unix sockets scoped to the
//     sandbox (ABI 6+), named Unix sockets only where writes are allowed
//     (ABI 9+);
//  5. loads a seccomp filter that kills any foreign-architecture or x32
//     system call, then one that refuses setuid/setgid modes, device
//     nodes and the kernel's keyrings, and, when the network is off,
//     socket(2) for any family but AF_UNIX, and io_uring;
//  6. marks every descriptor above 2 close-on-exec, makes the helper
//     non-dumpable, and forks /bin/sh -c from the confined thread (not
//     the main one); the shell inherits all of it, and the thread ends.
//     No thread of the helper stays in the command's Landlock domain,
//     so the command can neither signal nor trace the helper, whose
//     other threads keep their capabilities, and non-dumpable keeps its
//     memory, environment and descriptors out of /proc besides.
//
// The helper then stays PID 1 of the namespace: it reaps, forwards
// SIGTERM, SIGINT, SIGHUP and SIGQUIT to the shell, and waits a 1 s grace
// after the shell exits; its exit ends every leftover.
//
// The helper's namespaces are new mount, PID and IPC namespaces (and a
// user namespace when not root); it sets oom_score_adj to
// CommandOOMScoreAdj. The registry of homes (registry.go) fails closed.
//
// A helper may also be pre-started (Prestart, prestart_linux.go: "/proc/self/exe
// __sandbox-exec-prestart", its own process group, new PID and IPC
// namespaces, stage 2's user namespace when not root) before its command
// is known: it waits on fd 3 for one Dispatch line — the command's
// complete Spec, the command and its environment — and only then makes
// its mount namespace on the thread it confines (unshare, so the mounts
// are those of the dispatch), and does steps 1–6 as above. The gate and
// the dispatch are the same line: EOF runs nothing (exit 125). It dies
// with the daemon until dispatched (Pdeathsig, and EOF on fd 3), and
// serves one command.
//
// The package imports nothing of sessiond: its callers (tools) pass paths.
// It must not decide what is approved; it only confines.
package sandbox
