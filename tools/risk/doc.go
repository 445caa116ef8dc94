// Package risk rates a shell command, before it runs, as safe, dangerous
// (a person approves it in approvals.mode manual) or hardline (never run),
// with the stable keys of the rules it matched (PROTOCOL §7; the policy is
// docs/risk-rules.md).
//
// What it owns:
//
//   - [Classify] and [ClassifyWith]: parse a command with
//     mvdan.cc/sh/v3/syntax (bash dialect), follow what a shell would run
//     (pipelines, lists, substitutions, functions, wrappers such as sudo
//     and xargs, strings handed to sh -c, eval, ssh, git aliases, …; cd
//     through a list) and return a [Classification]: the worst [Risk], the
//     matched rules with reasons, and Pattern, the keys an approval
//     remembers. What it cannot analyse (unparseable input, names computed
//     at run time, inline interpreter code, a file written and run by the
//     same command whose text it cannot see, a path inside the daemon's
//     home) is dangerous, never safe; a shell script the same command
//     wrote whole from a literal is rated as its text;
//   - the policy as data: one table of [Rule] entries (key, risk, doc,
//     examples, whether approvals may be remembered by key) — [Rules],
//     [Lookup], [Unanalysable], [Markdown] — which the analyzers report by
//     typed [Key] constants and from which docs/risk-rules.md is generated
//     ("go generate ./tools/risk"; a test keeps them in sync);
//   - the analyzers, code not tables, one file per family of commands
//     (rm.go: rm, find, xargs; git.go; sedawk.go: sed, awk; archive.go;
//     interp.go: interpreters and shells; database.go; infra.go;
//     network.go; process.go; services.go and system.go: services,
//     packages, devices; perms.go; paths.go; daemonhome.go; exhaust.go;
//     runners.go; pagers.go: less, man; rawdev.go: raw filesystem access;
//     usersvc.go: clients of the user's own services), registered by
//     command name in a map (command.go); CLIs that name actions by verbs
//     share one table-driven matcher (verbs.go);
//   - the corpus, testdata/corpus/FAMILY.txt: commands with their expected
//     risk and rule key, destructive and everyday, which the tests run to
//     count false negatives (none allowed) and false positives.
//
// What it must not do: it imports nothing of this project, runs nothing,
// reads no files and knows nothing of sessions, approvals or the wire. It
// does not decide whether a dangerous command may run (the agent does,
// from the approval mode and the remembered patterns), and it knows only
// the paths its caller puts in a [Context]. Classification is static and
// best effort; it is the gate for what a person sees before it happens,
// not a sandbox.
package risk
