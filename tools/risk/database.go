package risk

import (
	"fmt"
	"regexp"
	"strings"
)

// SQL statements that destroy data. Inside SQL clients (psql -c, sqlite3,
// here-documents fed to them) they match in any case; elsewhere only in
// upper case, so that prose such as "drop table support" in a commit
// message stays safe. Comments are removed first (DROP/**/TABLE,
// DROP--x⏎TABLE), under the lexical rules of several dialects, since a
// comment inside a string in one dialect is code in another.
var (
	sqlStrict = regexp.MustCompile(`(?m)\b(DROP\s+(TABLE|DATABASE|SCHEMA)\b|TRUNCATE\s+(TABLE\b|[\w."]+\s*(;|$))|DELETE\s+FROM\s+[\w."]+\s*(;|$)|FLUSHALL\b|FLUSHDB\b)`)
	// sqlClient is for upper-cased SQL (and MongoDB shell code) given to a
	// client: every statement that mutates data or schema, with or
	// without WHERE.
	sqlClient = regexp.MustCompile(`\b(DROP\s+\w+|TRUNCATE\b|DELETE\s+FROM\b|DELETE\s+[\w."` + "`" + `]+\s+(WHERE|USING)\b|UPDATE\s+(ONLY\s+)?[^\s;(]+(\s+(AS\s+)?\w+)?\s+SET\b|ALTER\s+\w+|RENAME\s+TABLE\b|FLUSHALL\b|FLUSHDB\b|` +
		`DROPDATABASE\b|DELETEMANY\b|DELETEONE\b|UPDATEMANY\b|UPDATEONE\b|REPLACEONE\b|FINDONEANDDELETE\b|FINDONEANDUPDATE\b|FINDONEANDREPLACE\b|` +
		`FINDANDMODIFY\b|RENAMECOLLECTION\b|DROPINDEX(ES)?\b|DROPUSER\b|DROPALLUSERS\b|BULKWRITE\b)|\.(DROP|REMOVE)\s*\(`)
	// sqlKeywords are looked for before the regular expressions run.
	sqlKeywords = []string{"DROP", "TRUNCATE", "DELETE", "FLUSH", "UPDATE", "ALTER", "RENAME", "REMOVE", "REPLACE", "MODIFY", "BULKWRITE"}
	sqlDialects = []struct{ backslash, nested bool }{{false, true}, {false, false}, {true, false}, {true, true}}
)

func (c *classifier) sqlScan(s string, lenient bool) {
	if len(s) < 7 {
		return
	}
	hay := s
	if lenient {
		hay = strings.ToUpper(s)
	}
	// The regular expressions are slow on long text: look for a keyword first.
	if !containsAny(hay, sqlKeywords) {
		return
	}
	m := sqlMatch(hay, lenient)
	if m == "" && (strings.Contains(hay, "--") || strings.Contains(hay, "/*") || lenient && strings.Contains(hay, "#")) {
		for _, d := range sqlDialects {
			if m = sqlMatch(stripSQLComments(hay, d.backslash, d.nested, lenient), lenient); m != "" {
				break
			}
		}
	}
	if m != "" {
		m = strings.Join(strings.Fields(m), " ")
		c.add(RiskDangerous, KeySQLDestructive, fmt.Sprintf("destructive SQL statement (%s)", strings.TrimSuffix(m, ";")))
	}
}

// sqlMatch finds a statement that mutates data in upper-case SQL given
// to a client (lenient), or a destructive one in other text (strict):
// DROP TABLE/DATABASE/SCHEMA, TRUNCATE, DELETE FROM without WHERE,
// FLUSHALL/FLUSHDB.
func sqlMatch(s string, lenient bool) string {
	if !lenient {
		return sqlStrict.FindString(s)
	}
	return sqlClient.FindString(s)
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// stripSQLComments replaces SQL comments by spaces, skipping quoted
// strings and identifiers: backslash says whether a backslash escapes a
// quote (MySQL), nested whether block comments nest (PostgreSQL), hash
// whether # starts a comment (MySQL). The body of a MySQL executable
// comment (/*!…*/) is kept, since the server runs it.
func stripSQLComments(s string, backslash, nested, hash bool) string {
	var b strings.Builder
	b.Grow(len(s))
	exec := false // inside /*! … */
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == '\'' || ch == '"' || ch == '`':
			j := i + 1
			for j < len(s) {
				if backslash && s[j] == '\\' {
					j += 2
					continue
				}
				if s[j] == ch {
					if j+1 < len(s) && s[j+1] == ch {
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			j = min(j, len(s))
			b.WriteString(s[i:j])
			i = j
		case ch == '-' && i+1 < len(s) && s[i+1] == '-', hash && ch == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			b.WriteByte(' ')
		case ch == '/' && i+1 < len(s) && s[i+1] == '*' && i+2 < len(s) && s[i+2] == '!':
			i += 3
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			b.WriteByte(' ')
			exec = true
		case exec && ch == '*' && i+1 < len(s) && s[i+1] == '/':
			i += 2
			b.WriteByte(' ')
			exec = false
		case ch == '/' && i+1 < len(s) && s[i+1] == '*':
			depth := 1
			i += 2
			for i < len(s) && depth > 0 {
				switch {
				case s[i] == '*' && i+1 < len(s) && s[i+1] == '/':
					depth--
					i += 2
				case nested && s[i] == '/' && i+1 < len(s) && s[i+1] == '*':
					depth++
					i += 2
				default:
					i++
				}
			}
			b.WriteByte(' ')
		default:
			b.WriteByte(ch)
			i++
		}
	}
	return b.String()
}

// sqlShellRE finds the commands of SQL clients that run shell commands:
// sqlite3 .shell/.system and pipes in .once/.output/.import/.read, psql
// \! and \o | / \g |, mysql \! and system, and COPY … PROGRAM.
var sqlShellRE = regexp.MustCompile(`(?im)(^\s*\.(?:shell|system)\b|^\s*\.(?:once|output|import|read|excel)\s+(?:-\S+\s+)*['"]?\||\\!|\\[og]\s*\||\bprogram\s+['"]|^\s*system\s)`)

// sqlShell flags the shell escapes of SQL clients; the command after
// .shell, .system, \! or system is classified too.
func (c *classifier) sqlShell(client, s string) {
	if !strings.ContainsAny(s, ".\\|") && !strings.Contains(strings.ToLower(s), "system") && !strings.Contains(strings.ToLower(s), "program") {
		return
	}
	for _, loc := range sqlShellRE.FindAllStringIndex(s, 16) {
		m := strings.TrimSpace(s[loc[0]:loc[1]])
		rest := s[loc[1]:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[:nl]
		}
		switch strings.ToLower(strings.TrimRight(m, " \t")) {
		case ".shell", ".system", "\\!", "system":
			c.execOption(rest, client+" "+m+" "+strings.TrimSpace(rest), nil)
		default:
			c.add(RiskDangerous, KeyExecOption, fmt.Sprintf("SQL client runs a shell command (%s %s…)", client, m))
		}
	}
}

// sqlCheck scans here-documents and here-strings in the strict mode; the
// command they feed rescans them leniently when it is an SQL client.
func (c *classifier) sqlCheck(s string) { c.sqlScan(s, false) }

// Commands whose arguments hold another language that can run commands.

func init() {
	register(func(c *classifier, _ string, _ []arg, _ cmdCtx) {
		c.add(RiskDangerous, KeySQLDestructive, "drops a database (dropdb)")
	}, "dropdb")
	register(redis, "redis-cli", "valkey-cli", "keydb-cli")
	register(func(c *classifier, _ string, args []arg, _ cmdCtx) {
		// psql -f FILE runs the SQL of FILE: remembered, so that SQL
		// written by the same command is script-written.
		eachOpt(args, optSpec{shortArg: "cdfhLoPpUvT", longArg: []string{"command", "dbname", "file", "host", "log-file", "output", "port", "username", "set", "variable"}}, func(k, v string) {
			if k == "f" || k == "--file" {
				c.noteRan(v)
			}
		})
	}, "psql")
}

// redisVerbs are the redis commands that delete or change data or the
// server, or run code on it.
var redisVerbs = set("FLUSHALL", "FLUSHDB", "DEL", "UNLINK", "SHUTDOWN", "CONFIG", "SWAPDB", "DEBUG", "MIGRATE", "RENAME",
	"RENAMENX", "EVAL", "EVALSHA", "EVAL_RO", "SCRIPT", "FUNCTION", "FCALL", "MODULE", "SLAVEOF", "REPLICAOF", "EXPIRE", "PEXPIRE",
	"EXPIREAT", "GETDEL", "HDEL", "SREM", "ZREM", "LREM", "XDEL", "XTRIM", "LTRIM", "RESTORE", "ACL", "SET", "MSET", "HSET", "LPUSH", "RPUSH", "SADD", "ZADD", "INCR", "DECR", "APPEND")

// redis flags a redis-cli command that deletes or changes data.
func redis(c *classifier, name string, args []arg, _ cmdCtx) {
	_, ops := parseAll(args, optSpec{shortArg: "hpsanuidrcCt", longArg: []string{"user", "pass", "askpass", "tls", "cacert", "cert", "key", "sni", "pattern", "count", "quoted-pattern"}})
	if len(ops) > 0 && (redisVerbs[strings.ToUpper(ops[0].s)] || ops[0].dyn) {
		c.add(RiskDangerous, KeySQLDestructive, fmt.Sprintf("changes or deletes data (%s %s)", name, ops[0].s))
	}
}
