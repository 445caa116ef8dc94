package risk

import (
	"fmt"
	"path"
	"strings"
)

// Many CLIs name their action with verbs among their operands (docker
// system prune, kubectl -n prod delete pod x, aws ec2 terminate-instances,
// apt-get remove): one table describes them and one matcher reads them,
// so that no analyzer parses such options on its own.

// verbCLI describes a CLI whose operands name its actions.
type verbCLI struct {
	// spec says which options take a value, so that values are not read
	// as verbs (kubectl -n delete get pods).
	spec optSpec
	// rules are tried in order; every rule that matches is reported.
	rules []verbRule
	// skip are first operands that run or show something else, whose
	// later operands are not the CLI's verbs (docker exec box rm -rf x).
	skip map[string]bool
	// also is another analyzer the CLI needs, run after its verbs.
	also analyzer
}

// verbRule is one action of a CLI.
type verbRule struct {
	key Key
	// words are path.Match patterns matched, in order, against the
	// operands: the first among the first four, each next one among the
	// three operands after the previous match. Empty: any invocation.
	words []string
	// flags, if set, are options of which one must be given (pacman -R,
	// gh api -X DELETE written "X=DELETE" to require a value).
	flags []string
	// except are options that make the invocation harmless (iptables -L).
	except []string
	// what names the action in the reason ("removes packages").
	what string
}

// matchVerbs reports the rules of cli that args match.
func (c *classifier) matchVerbs(name string, cli verbCLI, args []arg) {
	o, ops := parseAll(args, cli.spec)
	if len(ops) > 0 && cli.skip[ops[0].s] {
		return
	}
	for _, r := range cli.rules {
		if words, ok := matchWords(r.words, ops); ok && r.flagsMatch(o) {
			rule, _ := Lookup(r.key)
			c.add(rule.Risk, r.key, fmt.Sprintf("%s (%s)", r.what, strings.TrimSpace(name+" "+words)))
		}
	}
}

func (r verbRule) flagsMatch(o opts) bool {
	for _, e := range r.except {
		if o.has(e) {
			return false
		}
	}
	if len(r.flags) == 0 {
		return true
	}
	for _, f := range r.flags {
		k, v, hasVal := strings.Cut(f, "=")
		if got, ok := o[k]; ok && (!hasVal || strings.EqualFold(got, v)) {
			return true
		}
	}
	return false
}

// matchWords matches patterns against operands (see verbRule.words) and
// returns the matched operands joined for the reason.
func matchWords(patterns []string, ops []arg) (string, bool) {
	var got []string
	from, window := 0, 4
	for _, p := range patterns {
		found := -1
		for i := from; i < len(ops) && i < from+window; i++ {
			if ok, _ := path.Match(p, ops[i].s); ok || p == "*" {
				found = i
				break
			}
		}
		if found < 0 {
			return "", false
		}
		got = append(got, ops[found].s)
		from, window = found+1, 3
	}
	return strings.Join(got, " "), true
}

// registerVerbs registers the CLIs of a table.
func registerVerbs(table map[string]verbCLI) {
	for name, cli := range table {
		register(func(c *classifier, name string, args []arg, cx cmdCtx) {
			c.matchVerbs(name, cli, args)
			if cli.also != nil {
				cli.also(c, name, args, cx)
			}
		}, name)
	}
}

// verbs builds the rules of one key from "what: word word | word" specs:
// each alternative separated by "|" is one rule.
func verbs(key Key, what string, alternatives ...string) []verbRule {
	var out []verbRule
	for _, alt := range alternatives {
		out = append(out, verbRule{key: key, what: what, words: strings.Fields(alt)})
	}
	return out
}

// join concatenates rule lists.
func join(lists ...[]verbRule) []verbRule {
	var out []verbRule
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
