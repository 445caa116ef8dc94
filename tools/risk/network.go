package risk

import (
	"fmt"
	"strings"
)

var (
	curlSpec = optSpec{shortArg: "AbcdDeEFHKmoPQrTuUwxXyYz", longArg: []string{"output", "output-dir", "data", "data-raw",
		"data-binary", "data-urlencode", "form", "header", "request", "user-agent", "referer", "user", "proxy",
		"upload-file", "range", "write-out", "config", "cookie", "cookie-jar", "dump-header", "max-time",
		"connect-timeout", "retry", "url", "cacert", "cert", "key"}}
	wgetSpec = optSpec{shortArg: "aABDeiIlOoPQRtTUwX", longArg: []string{"output-document", "output-file",
		"append-output", "directory-prefix", "tries", "timeout", "user-agent", "execute", "input-file", "wait",
		"quota", "level", "accept", "reject", "domains", "header", "user", "password", "post-data", "post-file",
		"body-data", "method"}}
)

func (c *classifier) copyDest(name string, args []arg) {
	sp := optSpec{shortArg: "StT", longArg: []string{"target-directory", "suffix", "backup"}}
	switch name {
	case "install":
		sp.shortArg = "gmoStT"
		sp.longArg = append(sp.longArg, "group", "mode", "owner", "strip-program")
	case "rsync":
		sp = optSpec{shortArg: "efTBM", longArg: []string{"rsh", "filter", "temp-dir", "block-size", "exclude", "include", "exclude-from", "include-from", "files-from", "out-format", "log-file", "password-file", "chmod", "chown", "rsync-path"}}
	case "scp":
		sp = optSpec{shortArg: "cFiJloPS"}
	}
	o, ops := parseAll(args, sp)
	switch name {
	case "rsync":
		if sh, ok := o.get("e", "--rsh"); ok {
			c.execOption(sh, "rsync -e "+sh, sshCmds)
		}
		for k := range o {
			switch {
			case k == "--del" || strings.HasPrefix(k, "--delete"):
				c.add(RiskDangerous, "rsync-delete", fmt.Sprintf("deletes files at the destination (rsync %s)", k))
			case k == "--remove-source-files" || k == "--remove-sent-files":
				c.add(RiskDangerous, "remove-source-files", fmt.Sprintf("deletes the files it copies (rsync %s)", k))
			}
		}
	case "scp":
		c.sshProgramOptions(name, args)
	}
	if t, ok := o.get("t", "--target-directory"); ok && name != "rsync" && name != "scp" {
		c.writeTarget(arg{s: t}, name)
		return
	}
	if len(ops) < 2 {
		return
	}
	dest := ops[len(ops)-1]
	c.writeTarget(dest, name)
	switch name {
	case "mv":
		if d, _ := c.abs(dest.s); d == "/dev/null" {
			c.add(RiskDangerous, "remove-source-files", "moves files into /dev/null, destroying them (mv … /dev/null)")
		}
	case "cp", "install":
		for _, src := range ops[:len(ops)-1] {
			if src.s == "/dev/null" {
				c.emptied(dest, name+" /dev/null "+dest.s)
			}
		}
	}
}

// sshProgramOptions classifies scp's and sftp's -o options like ssh's, and
// -S PROGRAM (-D for sftp), which replaces the ssh program.
func (c *classifier) sshProgramOptions(name string, args []arg) {
	var r resolved
	sshOptions(args, optSpec{shortArg: "cFiJloPSDBRs"}, &r)
	for _, src := range r.shellSrc {
		c.execOption(src, name+" -o", sshCmds)
	}
	for _, e := range r.execs {
		c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a program named in an option, which cannot be analysed (%s)", e))
	}
	o, _ := parseAll(args, optSpec{shortArg: "cFiJloPSDBRs"})
	for _, k := range []string{"S", "D"} {
		if v, ok := o[k]; ok && !harmless(v, sshCmds) {
			c.add(RiskDangerous, "exec-option", fmt.Sprintf("runs a program named in an option (%s -%s %s)", name, k, v))
		}
	}
}

func init() {
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		o, _ := parseAll(args, curlSpec)
		c.optTargets(name, o, "o", "--output", "D", "--dump-header", "c", "--cookie-jar")
	}, "curl")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) {
		o, _ := parseAll(args, wgetSpec)
		c.optTargets(name, o, "O", "--output-document", "o", "--output-file", "a", "--append-output")
	}, "wget")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.copyDest(name, args) }, "rsync", "scp")
	register(func(c *classifier, name string, args []arg, _ cmdCtx) { c.sshProgramOptions(name, args) }, "sftp")
}
