package risk

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every example of a rule is classified with the rule's risk and key: the
// table documents what the analyzers do.
func TestRuleExamples(t *testing.T) {
	for _, r := range Rules() {
		if !regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`).MatchString(string(r.Key)) {
			t.Errorf("key %q is not [a-z0-9-]", r.Key)
		}
		if r.Doc == "" || (r.Risk != RiskDangerous && r.Risk != RiskHardline) {
			t.Errorf("rule %s: empty doc or risk %q", r.Key, r.Risk)
		}
		if len(r.Examples) == 0 && r.Key != KeyTooComplex && r.Key != KeyInternalError {
			t.Errorf("rule %s has no example", r.Key)
		}
		for _, ex := range r.Examples {
			got := Classify(ex)
			if got.Risk != r.Risk || !slices.Contains(strings.Split(got.Pattern, "+"), string(r.Key)) {
				t.Errorf("example %q of %s (%s) = %s %s (%s)", ex, r.Key, r.Risk, got.Risk, got.Pattern, got.Reason)
			}
		}
	}
}

// Analyzers name rules by the typed keys of the table, never by string
// literals, and every key constant is an entry of the table and is
// reported somewhere.
func TestAnalyzersUseTableKeys(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	literal := regexp.MustCompile(`\badd\(\s*Risk\w+,\s*"`)
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if loc := literal.FindIndex(src); loc != nil {
			t.Errorf("%s:%d names a rule by a string literal", f, bytes.Count(src[:loc[0]], []byte("\n"))+1)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Key" {
					for i, name := range n.Names {
						lit := n.Values[i].(*ast.BasicLit).Value
						if _, ok := Lookup(Key(strings.Trim(lit, `"`))); !ok {
							t.Errorf("key constant %s = %s is not in the table", name.Name, lit)
						}
					}
					return false
				}
			case *ast.Ident:
				if f != "catalog.go" && strings.HasPrefix(n.Name, "Key") {
					used[n.Name] = true
				}
			}
			return true
		})
	}
	src, _ := os.ReadFile("catalog.go")
	for _, m := range regexp.MustCompile(`\t(Key\w+)\s+Key = `).FindAllStringSubmatch(string(src), -1) {
		if !used[m[1]] {
			t.Errorf("rule %s is in the table but no analyzer reports it", m[1])
		}
	}
}

// docs/risk-rules.md is generated from the table.
func TestRiskRulesDocInSync(t *testing.T) {
	got, err := os.ReadFile("../../docs/risk-rules.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Markdown()) {
		t.Errorf("docs/risk-rules.md is out of date with tools/risk/catalog.go: run go generate ./tools/risk")
	}
}

func TestUnanalysable(t *testing.T) {
	for pattern, want := range map[string]bool{
		"rm-recursive": false, "git-push-force+rm-recursive": false, "inline-code": true,
		"rm-recursive+exec-option": true, "no-such-rule": true, "": true,
	} {
		if got := Unanalysable(pattern); got != want {
			t.Errorf("Unanalysable(%q) = %v, want %v", pattern, got, want)
		}
	}
}
