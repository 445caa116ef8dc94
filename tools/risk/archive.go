package risk

import (
	"fmt"
	"slices"
	"strings"
)

// --checkpoint-action=exec=, -I PROGRAM, -F SCRIPT, --rsh-command), delete
// the archived files (--remove-files) or extract into a directory (-C).
func (c *classifier) tar(args []arg) {
	extract := false
	var dirs []arg
	short := func(ch byte, v arg) {
		switch ch {
		case 'I':
			c.tarCompressor(v.s)
		case 'F':
			c.execOption(v.s, "tar -F "+v.s, nil)
		case 'C':
			dirs = append(dirs, v)
		}
	}
	i := 0
	if len(args) > 0 && !strings.HasPrefix(args[0].s, "-") && !args[0].dyn && args[0].s != "" &&
		strings.Trim(args[0].s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
		// Old-style options: tar xzf FILE, each value-taking letter takes the next word.
		i = 1
		for j := 0; j < len(args[0].s); j++ {
			ch := args[0].s[j]
			extract = extract || ch == 'x'
			if strings.IndexByte("fCIFTXbgKLNVH", ch) >= 0 && i < len(args) {
				short(ch, args[i])
				i++
			}
		}
	}
	for ; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			break
		}
		if strings.HasPrefix(s, "--") {
			o, optValue := longOpt(args, &i)
			value := func() string { return optValue().s }
			switch {
			case longMatch(o, "to-command", 4):
				c.execOption(value(), "tar --to-command", nil)
			case longMatch(o, "checkpoint-action", 11):
				if cmd, ok := strings.CutPrefix(value(), "exec="); ok {
					c.execOption(cmd, "tar --checkpoint-action=exec", nil)
				}
			case longMatch(o, "use-compress-program", 4):
				c.tarCompressor(value())
			case longMatch(o, "info-script", 3), longMatch(o, "new-volume-script", 4), longMatch(o, "rsh-command", 3), longMatch(o, "rmt-command", 3):
				v := value()
				c.execOption(v, "tar --"+o+" "+v, nil)
			case longMatch(o, "directory", 3):
				dirs = append(dirs, optValue())
			case longMatch(o, "remove-files", 3):
				c.add(RiskDangerous, KeyRemoveSourceFiles, "deletes the files it archives (tar --remove-files)")
			case longMatch(o, "extract", 3) || longMatch(o, "get", 3):
				extract = true
			case o == "file" || longMatch(o, "exclude", 3) || longMatch(o, "transform", 3) || longMatch(o, "files-from", 6):
				value()
			}
			continue
		}
		if len(s) > 1 && s[0] == '-' {
			for j := 1; j < len(s); j++ {
				ch := s[j]
				extract = extract || ch == 'x'
				if strings.IndexByte("fCIFTXbgKLNVH", ch) >= 0 {
					v := clusterValue(args, &i, j)
					short(ch, v)
					break
				}
			}
		}
	}
	// tar -C DIR reads and writes the files it names below DIR.
	for _, d := range dirs {
		for _, a := range args {
			if !strings.HasPrefix(a.s, "-") && a.s != d.s {
				c.protectedPath(arg{s: strings.TrimRight(d.s, "/") + "/" + a.s})
			}
		}
	}
	if extract && len(dirs) == 0 {
		c.unpackInto(arg{s: "."}, "tar -x in") // where cd took the shell
	}
	if extract {
		for _, d := range dirs {
			c.unpackInto(d, "tar -x -C")
		}
	}
}

// unzip -d DIR extracts into DIR; -l, -t, -v, -p, -c, -z and -Z only
// list, test or print.
func unzip(c *classifier, name string, args []arg, _ cmdCtx) {
	for _, a := range args {
		if name == "unzip" && len(a.s) > 1 && a.s[0] == '-' && a.s[1] != '-' && strings.ContainsAny(a.s[1:], "ltvpczZ") {
			return // lists, tests or prints the archive: writes nothing
		}
	}
	if !slices.ContainsFunc(args, func(a arg) bool { return strings.HasPrefix(a.s, "-d") }) {
		c.unpackInto(arg{s: "."}, name+" in") // where cd took the shell
	}
	for i, a := range args {
		switch {
		case a.s == "-d" && i+1 < len(args):
			c.unpackInto(args[i+1], name+" -d")
		case strings.HasPrefix(a.s, "-d") && len(a.s) > 2 && !strings.HasPrefix(a.s, "--"):
			c.unpackInto(arg{s: a.s[2:], dyn: a.dyn, word: a.word}, name+" -d")
		}
	}
}

// tarCompressor classifies the program tar -I runs: a known compressor
// (with options) is fine, anything else cannot be analysed.
func (c *classifier) tarCompressor(prog string) {
	c.nested(prog)
	f := strings.Fields(prog)
	if len(f) == 0 || !compressors[commandName(f[0])] || strings.ContainsAny(prog, ";&|<>$`()") {
		c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("runs a program as tar's compressor (tar -I %s)", prog))
	}
}

// zip: -m / --move deletes the files it archives; -TT names the command
// that tests the archive.
func (c *classifier) zip(args []arg) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "--move":
			c.add(RiskDangerous, KeyRemoveSourceFiles, "deletes the files it archives (zip -m)")
		case s == "-TT" || s == "--unzip-command":
			if i+1 < len(args) {
				i++
				c.execOption(args[i].s, "zip -TT", nil)
			}
		case strings.HasPrefix(s, "--unzip-command="):
			c.execOption(s[len("--unzip-command="):], "zip -TT", nil)
		case len(s) > 1 && s[0] == '-' && s[1] != '-' && strings.ContainsRune(s, 'm') &&
			strings.Trim(s[1:], "0123456789abcdefghijklmnopqrstuvwxyzADFJLRSTUVX$@") == "":
			c.add(RiskDangerous, KeyRemoveSourceFiles, "deletes the files it archives (zip -m)")
		}
	}
}

func init() {
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.tar(args) }, "tar", "gtar", "bsdtar")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) { c.zip(args) }, "zip")
	register(sevenZip, "7z", "7za", "7zz", "7zr")
	register(unzip, "unzip", "funzip", "unar")
	register(cpio, "cpio")
}

// cpio -i (--extract) unpacks into -D DIR (--directory) or where cd took
// the shell; cpio -p (--pass-through) copies into its operand.
func cpio(c *classifier, name string, args []arg, _ cmdCtx) {
	o, ops := parseAll(args, optSpec{shortArg: "DEFHIMORC", longArg: []string{"directory", "pattern-file", "file", "format",
		"message", "owner", "block-size", "io-size", "rsh-command", "to-stdout"}})
	dir, hasDir := o.get("D", "--directory")
	if !hasDir {
		dir = "."
	}
	switch {
	case o.has("i", "--extract") && !o.has("t", "--list", "--to-stdout"):
		c.unpackInto(arg{s: dir}, name+" -i")
	case o.has("p", "--pass-through") && len(ops) > 0:
		c.unpackInto(ops[len(ops)-1], name+" -p")
	}
	if v, ok := o.get("--rsh-command"); ok {
		c.execOption(v, "cpio --rsh-command", nil)
	}
}

// sevenZip: -sdel deletes the files it archives.
func sevenZip(c *classifier, _ string, args []arg, _ cmdCtx) {
	for _, a := range args {
		if a.s == "-sdel" {
			c.add(RiskDangerous, KeyRemoveSourceFiles, "deletes the files it archives (7z -sdel)")
		}
		if d, ok := strings.CutPrefix(a.s, "-o"); ok && d != "" {
			c.unpackInto(arg{s: d, dyn: a.dyn, word: a.word}, "7z -o")
		}
	}
}
