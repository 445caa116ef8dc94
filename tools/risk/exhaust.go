package risk

import (
	"fmt"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Exhausting the machine: loops that start background jobs without end,
// unbounded parallelism, huge files. The terminal's timeout ends the
// command, not the processes or the disk space it has already taken.

// hugeBytes is the size from which a file a command allocates is huge.
const hugeBytes = 1 << 30

func init() {
	register(fallocate, "fallocate", "mkfile")
}

// fallocate flags allocations of a gigabyte or more.
func fallocate(c *classifier, name string, args []arg, _ cmdCtx) {
	o, ops := parseAll(args, optSpec{shortArg: "lo", longArg: []string{"length", "offset"}})
	size, ok := o.get("l", "--length")
	if name == "mkfile" && len(ops) > 0 {
		size, ok = ops[0].s, true
	}
	for k := range o {
		switch k {
		case "p", "--punch-hole", "c", "--collapse-range", "z", "--zero-range", "i", "--insert-range", "d", "--dig-holes":
			for _, f := range ops {
				c.emptied(f, fmt.Sprintf("%s -%s %s", name, strings.TrimLeft(k, "-"), f.s))
			}
		}
	}
	if n, known := parseSize(size); ok && (!known || n >= hugeBytes) {
		c.add(RiskDangerous, KeyResourceExhaustion, fmt.Sprintf("allocates a huge file (%s %s)", name, size))
	}
}

// ddSize flags a dd that writes a gigabyte or more to a file, or that
// copies an endless source (/dev/zero, /dev/urandom) without a count.
// endlessSources are the devices that never run dry.
var endlessSources = set("/dev/zero", "/dev/urandom", "/dev/random")

// endlessStream reports whether a resolved command writes an endless or
// huge stream to its output: yes; cat or tail of /dev/zero or
// /dev/urandom; head -c of 1G or more (or of a size it cannot read) from
// one of those; seq inf. It returns what it runs, for the reason.
func endlessStream(r resolved) (string, bool) {
	if r.dynamic {
		return "", false
	}
	switch r.name {
	case "yes":
		return "yes", true
	case "seq":
		for _, a := range r.args {
			if strings.EqualFold(a.s, "inf") || strings.EqualFold(a.s, "infinity") {
				return "seq " + a.s, true
			}
		}
	case "cat", "tail", "head":
		o, ops := parseAll(r.args, optSpec{shortArg: "cnsF", longArg: []string{"bytes", "lines", "sleep-interval", "pid", "max-unchanged-stats"}})
		src := ""
		for _, a := range ops {
			if endlessSources[a.s] {
				src = a.s
			}
		}
		if src == "" {
			return "", false
		}
		if r.name != "head" {
			return r.name + " " + src, true
		}
		n, ok := o.get("c", "--bytes")
		if !ok {
			return "", false // head -n of a device without lines ends soon enough or not at all, as cat does
		}
		if size, known := parseSize(strings.TrimPrefix(n, "-")); !known || size >= hugeBytes {
			return "head -c " + n + " " + src, true
		}
	}
	return "", false
}

func (c *classifier) ddSize(args []arg) {
	vals := map[string]string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a.s, "="); ok {
			vals[k] = v
		}
	}
	out, ok := vals["of"]
	if !ok || strings.HasPrefix(out, "/dev/") {
		return
	}
	bs, known := parseSize(vals["bs"])
	if vals["bs"] == "" {
		bs, known = 512, true
	}
	if obs, ok := parseSize(vals["obs"]); vals["obs"] != "" && ok {
		bs = obs
	}
	count, hasCount := vals["count"]
	in := vals["if"]
	switch {
	case !hasCount && (in == "/dev/zero" || in == "/dev/urandom" || in == "/dev/random"):
		c.add(RiskDangerous, KeyResourceExhaustion, fmt.Sprintf("fills the disk from an endless source (dd if=%s of=%s)", in, out))
	case hasCount:
		n, ok := parseSize(count)
		if !ok || !known || n > 0 && bs >= hugeBytes/n {
			c.add(RiskDangerous, KeyResourceExhaustion, fmt.Sprintf("writes a huge file (dd bs=%s count=%s of=%s)", vals["bs"], count, out))
		}
	}
}

// parseSize reads a size such as 50G, 1GiB, 10M, 4096 or 2k; known is
// false when it cannot be read (computed at run time, unknown unit).
func parseSize(s string) (n int64, known bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9') {
		i++
	}
	v, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, false
	}
	mult := int64(1)
	switch strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s[i:], "iB"), "B")) {
	case "", "C":
	case "W":
		mult = 2
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	case "P", "E", "Z", "Y":
		return 1 << 62, true
	default:
		return 0, false
	}
	if v > (1<<62)/mult {
		return 1 << 62, true
	}
	return v * mult, true
}

// loop flags a loop that starts background jobs and may run without end
// or very many times: while true, until false, for ((;;)), or a for loop
// over words computed at run time or a long sequence.
func (c *classifier) loop(n syntax.Node) {
	var body []*syntax.Stmt
	endless := false
	switch l := n.(type) {
	case *syntax.WhileClause:
		body = l.Do
		endless = constantCond(l.Cond, l.Until)
	case *syntax.ForClause:
		body = l.Do
		switch it := l.Loop.(type) {
		case *syntax.CStyleLoop:
			endless = it.Cond == nil
		case *syntax.WordIter:
			endless = !it.InPos.IsValid() || manyItems(it.Items)
		}
	}
	if !endless || !startsJobs(body) {
		return
	}
	c.add(RiskDangerous, KeyResourceExhaustion, "a loop that may not end starts background jobs (… & done), which can exhaust the machine")
}

// constantCond reports whether a while (until) condition is always true
// (false): true, :, [ 1 ].
func constantCond(cond []*syntax.Stmt, until bool) bool {
	if len(cond) != 1 {
		return false
	}
	call, ok := cond[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 || cond[0].Negated {
		return false
	}
	switch call.Args[0].Lit() {
	case "true", ":":
		return !until
	case "false":
		return until
	case "[", "test":
		return !until && len(call.Args) <= 3
	}
	return false
}

// manyItems reports whether a for loop's word list may be long: it holds a
// command substitution, a glob or a brace sequence.
func manyItems(items []*syntax.Word) bool {
	if len(items) > maxBraceExpansions {
		return true
	}
	for _, w := range items {
		for _, p := range w.Parts {
			switch p := p.(type) {
			case *syntax.CmdSubst:
				if !shortSeq(p) {
					return true
				}
			case *syntax.Lit:
				if strings.Contains(p.Value, "..") && strings.Contains(p.Value, "{") {
					return true // {1..100000}
				}
			}
		}
	}
	return false
}

// startsJobs reports whether statements start a background job.
func startsJobs(stmts []*syntax.Stmt) bool {
	found := false
	for _, s := range stmts {
		syntax.Walk(s, func(n syntax.Node) bool {
			if st, ok := n.(*syntax.Stmt); ok && (st.Background || st.Coprocess) {
				found = true
			}
			return !found
		})
	}
	return found
}

// shortSeq reports whether a command substitution is $(seq [A] B) with
// literal bounds that make at most maxBraceExpansions numbers.
func shortSeq(cs *syntax.CmdSubst) bool {
	if len(cs.Stmts) != 1 {
		return false
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) < 2 || len(call.Args) > 3 || call.Args[0].Lit() != "seq" {
		return false
	}
	lo, hi := int64(1), int64(0)
	var err error
	if len(call.Args) == 3 {
		if lo, err = strconv.ParseInt(call.Args[1].Lit(), 10, 64); err != nil {
			return false
		}
	}
	if hi, err = strconv.ParseInt(call.Args[len(call.Args)-1].Lit(), 10, 64); err != nil {
		return false
	}
	return hi-lo < maxBraceExpansions
}
