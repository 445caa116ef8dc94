package risk

import "fmt"

// System services and state outside the workspace: services, mounts,
// firewall rules, network links and routes, kernel modules and
// parameters, users, and system packages.

const changesSystem = "changes system state outside the workspace"

var (
	// systemctlVerbs are the systemctl and loginctl verbs that change state;
	// those that shut the machine down are hardline (shutdown) apart.
	systemctlVerbs = join(verbs(KeyShutdown, "shuts down or reboots the machine", "poweroff", "reboot", "halt", "kexec", "soft-reboot"), verbs(KeySystemState, changesSystem, "start", "stop", "restart", "reload", "try-restart",
		"reload-or-restart", "try-reload-or-restart", "enable", "disable", "reenable", "mask", "unmask", "link",
		"kill", "isolate", "set-default", "daemon-reload", "daemon-reexec", "edit", "revert", "preset", "preset-all",
		"set-property", "set-environment", "unset-environment", "import-environment", "freeze", "thaw", "clean",
		"switch-root", "rescue", "emergency", "default", "suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate",
		"terminate-session", "terminate-user", "kill-session", "kill-user", "enable-linger", "disable-linger",
		"lock-sessions", "lock-session", "reset-failed"))
	// anyButListing flags every invocation except those that only list.
	anyButListing = func(what string, listing ...string) []verbRule {
		return []verbRule{{key: KeySystemState, what: what, except: listing}}
	}
	packageRemoval = "removes system packages"
)

var systemCLIs = map[string]verbCLI{
	"systemctl": {spec: optSpec{shortArg: "HMtpsnoP", longArg: []string{"host", "machine", "type", "property", "signal",
		"lines", "output", "state", "kill-whom", "root", "job-mode", "when", "message"}}, rules: systemctlVerbs},
	"loginctl":          {spec: optSpec{shortArg: "HMpsn", longArg: []string{"host", "machine", "property", "signal", "lines", "output", "kill-whom"}}, rules: systemctlVerbs},
	"service":           {rules: verbs(KeySystemState, changesSystem, "* start", "* stop", "* restart", "* reload", "* force-reload", "* try-restart")},
	"rc-service":        {rules: verbs(KeySystemState, changesSystem, "* start", "* stop", "* restart", "* reload")},
	"update-rc.d":       {rules: verbs(KeySystemState, changesSystem, "*")},
	"chkconfig":         {rules: verbs(KeySystemState, changesSystem, "* on", "* off", "* reset", "--add", "--del")},
	"mount":             {spec: optSpec{shortArg: "tOoLUT", longArg: []string{"types", "options", "label", "uuid", "fstab"}}, rules: verbs(KeySystemState, "mounts a filesystem", "*")},
	"umount":            {rules: verbs(KeySystemState, "unmounts a filesystem", "*")},
	"swapon":            {rules: []verbRule{{key: KeySystemState, what: changesSystem, except: []string{"s", "--show", "--summary"}, words: []string{"*"}}, {key: KeySystemState, what: changesSystem, flags: []string{"a", "--all"}}}},
	"swapoff":           {rules: anyButListing(changesSystem, "h", "--help", "V", "--version")},
	"iptables":          {spec: optSpec{shortArg: "tW"}, rules: anyButListing("changes firewall rules", "L", "S", "--list", "--list-rules", "h", "--help", "V", "--version")},
	"ip6tables":         {spec: optSpec{shortArg: "tW"}, rules: anyButListing("changes firewall rules", "L", "S", "--list", "--list-rules", "h", "--help", "V", "--version")},
	"iptables-restore":  {rules: anyButListing("changes firewall rules", "h", "--help", "t", "--test")},
	"ip6tables-restore": {rules: anyButListing("changes firewall rules", "h", "--help", "t", "--test")},
	"nft":               {spec: optSpec{shortArg: "fIc"}, rules: join(verbs(KeySystemState, "changes firewall rules", "add", "delete", "destroy", "flush", "insert", "replace", "create", "reset", "rename"), []verbRule{{key: KeySystemState, what: "changes firewall rules", flags: []string{"f", "--file"}}})},
	"ufw":               {rules: verbs(KeySystemState, "changes firewall rules", "enable", "disable", "reset", "allow", "deny", "reject", "limit", "delete", "insert", "default", "route", "reload", "prepend")},
	"firewall-cmd":      {rules: []verbRule{{key: KeySystemState, what: "changes firewall rules", flags: []string{"--add-service", "--remove-service", "--add-port", "--remove-port", "--reload", "--complete-reload", "--set-default-zone", "--add-rich-rule", "--remove-rich-rule", "--panic-on", "--runtime-to-permanent", "--add-source", "--remove-source", "--add-interface", "--remove-interface", "--change-interface", "--add-masquerade", "--add-forward-port"}}}},
	// ip spells its options with one dash (-br, -batch): only -n NETNS
	// takes a value that could be read as an object.
	"ip": {spec: optSpec{shortArg: "n"},
		rules: verbs(KeySystemState, "changes network links, addresses or routes", "* add", "* del", "* delete", "* set", "* change", "* replace", "* flush", "* append", "* attach", "* detach")},
	"ifconfig":            {rules: verbs(KeySystemState, "changes network links", "* *")},
	"ifdown":              {rules: verbs(KeySystemState, "changes network links", "*")},
	"ifup":                {rules: verbs(KeySystemState, "changes network links", "*")},
	"route":               {rules: verbs(KeySystemState, "changes network routes", "add", "del", "delete", "flush", "change")},
	"nmcli":               {rules: verbs(KeySystemState, "changes network settings", "* down", "* up", "* delete", "* modify", "* add", "* set", "* off", "* on", "* disconnect", "* connect", "* reload")},
	"sysctl":              {rules: join([]verbRule{{key: KeySystemState, what: "changes kernel parameters", flags: []string{"w", "--write", "p", "--load", "--system"}}}, verbs(KeySystemState, "changes kernel parameters", "*=*"))},
	"modprobe":            {rules: anyButListing("loads or unloads kernel modules", "n", "--dry-run", "c", "--showconfig", "h", "--help", "V", "--version")},
	"insmod":              {rules: anyButListing("loads kernel modules")},
	"rmmod":               {rules: anyButListing("unloads kernel modules")},
	"hostnamectl":         {rules: verbs(KeySystemState, changesSystem, "set-*", "hostname *")},
	"timedatectl":         {rules: verbs(KeySystemState, changesSystem, "set-*")},
	"localectl":           {rules: verbs(KeySystemState, changesSystem, "set-*")},
	"update-alternatives": {rules: []verbRule{{key: KeySystemState, what: changesSystem, flags: []string{"--install", "--remove", "--remove-all", "--set", "--auto", "--config", "--all"}}}},
	"useradd":             {rules: anyButListing("changes users or groups")},
	"userdel":             {rules: anyButListing("changes users or groups")},
	"usermod":             {rules: anyButListing("changes users or groups")},
	"groupadd":            {rules: anyButListing("changes users or groups")},
	"groupdel":            {rules: anyButListing("changes users or groups")},
	"gpasswd":             {rules: anyButListing("changes users or groups")},
	"passwd":              {rules: anyButListing("changes users or groups", "S", "--status")},
	"chpasswd":            {rules: anyButListing("changes users or groups")},
	"chsh":                {rules: anyButListing("changes users or groups")},
	"setenforce":          {rules: anyButListing(changesSystem)},
	"apt":                 {rules: verbs(KeyPackageRemove, packageRemoval, "remove", "purge", "autoremove", "autopurge")},
	"apt-get":             {rules: verbs(KeyPackageRemove, packageRemoval, "remove", "purge", "autoremove", "autopurge")},
	"aptitude":            {rules: verbs(KeyPackageRemove, packageRemoval, "remove", "purge")},
	"dpkg":                {rules: []verbRule{{key: KeyPackageRemove, what: packageRemoval, flags: []string{"r", "P", "--remove", "--purge"}}}},
	"yum":                 {rules: verbs(KeyPackageRemove, packageRemoval, "remove", "erase", "autoremove")},
	"dnf":                 {rules: verbs(KeyPackageRemove, packageRemoval, "remove", "erase", "autoremove")},
	"microdnf":            {rules: verbs(KeyPackageRemove, packageRemoval, "remove")},
	"rpm":                 {rules: []verbRule{{key: KeyPackageRemove, what: packageRemoval, flags: []string{"e", "--erase"}}}},
	"pacman":              {rules: []verbRule{{key: KeyPackageRemove, what: packageRemoval, flags: []string{"R", "--remove"}}}},
	"yay":                 {rules: []verbRule{{key: KeyPackageRemove, what: packageRemoval, flags: []string{"R", "--remove"}}}},
	"zypper":              {rules: verbs(KeyPackageRemove, packageRemoval, "remove", "rm")},
	"apk":                 {rules: verbs(KeyPackageRemove, packageRemoval, "del")},
	"snap":                {rules: verbs(KeyPackageRemove, packageRemoval, "remove")},
	"flatpak":             {rules: verbs(KeyPackageRemove, packageRemoval, "uninstall", "remove")},
	"brew":                {rules: verbs(KeyPackageRemove, packageRemoval, "uninstall", "remove", "rm", "autoremove")},
	"port":                {rules: verbs(KeyPackageRemove, packageRemoval, "uninstall")},
	"nix-env":             {rules: []verbRule{{key: KeyPackageRemove, what: packageRemoval, flags: []string{"e", "--uninstall"}}}},
	"emerge":              {rules: []verbRule{{key: KeyPackageRemove, what: packageRemoval, flags: []string{"C", "--unmerge", "--depclean", "c"}}}},
	"npm":                 {rules: []verbRule{{key: KeyPackageRemove, what: "removes globally installed packages", words: []string{"un*"}, flags: []string{"g", "--global"}}, {key: KeyPackageRemove, what: "removes globally installed packages", words: []string{"r*"}, flags: []string{"g", "--global"}}}},
}

func init() {
	registerVerbs(systemCLIs)
	for _, n := range []string{"stress", "stress-ng", "memtester"} {
		register(func(c *classifier, name string, _ []arg, _ cmdCtx) {
			c.add(RiskDangerous, KeyResourceExhaustion, fmt.Sprintf("loads the machine on purpose (%s)", name))
		}, n)
	}
}
