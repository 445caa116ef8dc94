package risk

import "strings"

// Build and test runners read files that hold commands: make runs the
// Makefile's recipes, npm the scripts of package.json, pytest the code
// of conftest.py. A command that writes one of them and then runs the
// runner runs code that was never shown (rule script-written), just as
// "echo … > s.sh && sh s.sh" does.

// runnerFiles maps a runner to the files it reads code from, by base name.
var runnerFiles = map[string][]string{
	"make": {"Makefile", "makefile", "GNUmakefile"}, "gmake": {"Makefile", "makefile", "GNUmakefile"},
	"npm": {"package.json", ".npmrc"}, "yarn": {"package.json", ".yarnrc", ".yarnrc.yml"}, "pnpm": {"package.json", ".npmrc"},
	"npx": {"package.json"}, "bun": {"package.json", "bunfig.toml"}, "deno": {"deno.json", "deno.jsonc"},
	"pytest": {"conftest.py", "pytest.ini"}, "py.test": {"conftest.py", "pytest.ini"},
	"tox": {"tox.ini", "setup.py", "pyproject.toml"}, "nox": {"noxfile.py"}, "invoke": {"tasks.py"},
	"pip": {"setup.py", "pyproject.toml"}, "pip3": {"setup.py", "pyproject.toml"},
	"rake": {"Rakefile", "rakefile"}, "just": {"justfile", "Justfile", ".justfile"}, "task": {"Taskfile.yml", "Taskfile.yaml"},
	"cargo": {"build.rs"}, "gradle": {"build.gradle", "build.gradle.kts", "settings.gradle"},
	"gradlew": {"build.gradle", "build.gradle.kts", "settings.gradle"}, "mvn": {"pom.xml"}, "ant": {"build.xml"},
	"cmake": {"CMakeLists.txt"}, "meson": {"meson.build"}, "ninja": {"build.ninja"},
	"composer": {"composer.json"}, "bundle": {"Gemfile"}, "mix": {"mix.exs"}, "sbt": {"build.sbt"},
	"jest": {"jest.config.js", "jest.config.ts", "package.json"}, "vitest": {"vitest.config.ts", "vite.config.ts"},
	"docker-compose": {"docker-compose.yml", "compose.yaml"}, "pre-commit": {".pre-commit-config.yaml"},
}

// pythonModuleRunners are python -m modules that are runners.
var pythonModuleRunners = map[string]string{"pytest": "pytest", "pip": "pip", "tox": "tox", "nox": "nox"}

// noteRunner remembers the files a runner reads code from.
func (c *classifier) noteRunner(name string) {
	for _, f := range runnerFiles[name] {
		c.noteRan(f)
	}
}

// noteModuleRuns remembers the files run by name rather than by path:
// python -m mod runs mod.py.
func (c *classifier) noteModuleRuns(name string, args []arg) {
	if interpreterKind(name) == "python" {
		for i, a := range args {
			mod, ok := strings.CutPrefix(a.s, "-m")
			if !ok || strings.HasPrefix(a.s, "--") {
				continue
			}
			if mod == "" && i+1 < len(args) {
				mod = args[i+1].s
			}
			if j := strings.LastIndexByte(mod, '.'); j >= 0 {
				mod = mod[j+1:]
			}
			if mod != "" {
				c.noteRan(mod + ".py")
			}
			return
		}
	}
}
