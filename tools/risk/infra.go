package risk

import (
	"fmt"
	"strings"
)

// Infrastructure CLIs: containers, clusters, clouds, hosting. Their
// destructive verbs act on live systems far beyond the workspace.

const destroys = "destroys live infrastructure or its data"

// containerSpec are docker's and podman's options that take a value.
var containerSpec = optSpec{shortArg: "cHlDefpvwuhmn", longArg: []string{"context", "host", "config", "log-level", "name",
	"env", "volume", "publish", "workdir", "user", "network", "mount", "entrypoint", "filter", "label", "file", "project-name", "pid", "cap-add"}}

var (
	containerVerbs = verbCLI{
		spec:  containerSpec,
		rules: verbs(KeyInfraDestructive, destroys, "rm", "rmi", "prune", "kill", "stop", "down", "destroy", "reset"),
		also:  hostAccess,
		skip:  set("run", "exec", "build", "create", "cp", "logs", "inspect", "ps", "images", "pull", "push", "buildx", "commit", "tag", "attach"),
	}
	kubeVerbs = verbCLI{
		spec: optSpec{shortArg: "nlfoscLp", longArg: []string{"namespace", "context", "cluster", "kubeconfig", "selector",
			"filename", "output", "server", "user", "token", "as", "field-selector", "container", "replicas"}},
		rules: verbs(KeyInfraDestructive, destroys, "delete", "drain", "cordon", "replace", "rollout undo", "taint"),
		skip:  set("exec", "run", "logs", "get", "describe", "cp", "debug", "attach", "port-forward"),
	}
	awsLike = verbCLI{
		spec: optSpec{longArg: []string{"profile", "region", "endpoint-url", "output", "query", "project", "zone",
			"resource-group", "subscription", "account", "configuration", "format"}},
		also: cloudCopy,
		rules: verbs(KeyInfraDestructive, destroys, "rm", "rb", "delete", "delete-*", "terminate-*", "remove-*",
			"deregister-*", "purge", "purge-*", "disable-*", "detach-*", "destroy"),
	}
	ghLike = verbCLI{
		spec: optSpec{shortArg: "RXHfFpjqt", longArg: []string{"repo", "method", "header", "field", "raw-field", "jq", "template", "hostname", "input"}},
		also: cloudCopy,
		rules: join(verbs(KeyInfraDestructive, destroys, "repo delete", "repo archive", "repo rename", "release delete",
			"run delete", "secret delete", "secret remove", "variable delete", "gist delete", "label delete",
			"cache delete", "ssh-key delete", "gpg-key delete", "project delete", "mr delete", "issue delete"),
			[]verbRule{{key: KeyInfraDestructive, what: destroys, words: []string{"api"}, flags: []string{"X=DELETE", "--method=DELETE"}}}),
	}
	terraformVerbs = verbCLI{
		spec:  optSpec{longArg: []string{"chdir"}},
		rules: verbs(KeyInfraDestructive, "destroys or changes live infrastructure", "destroy", "apply", "state rm", "state mv", "state push", "state replace-provider", "taint", "force-unlock", "workspace delete", "up", "stack rm"),
	}
	genericDelete = verbCLI{
		spec:  optSpec{shortArg: "nc", longArg: []string{"namespace", "context", "region", "profile", "config"}},
		rules: verbs(KeyInfraDestructive, destroys, "delete", "destroy", "purge", "uninstall", "rollback", "undefine", "vol-delete", "pool-delete", "del", "rm", "rb", "deletefile", "rmdir", "rmdirs", "cleanup", "sync", "apps:destroy", "pg:reset", "*:delete", "*:destroy", "*:remove", "reset", "stop", "job stop", "kv delete", "kv destroy", "kv metadata delete", "secrets disable", "drop"),
	}
)

var rcloneVerbs = func() verbCLI { v := genericDelete; v.also = cloudCopy; return v }()

var infraCLIs = map[string]verbCLI{
	"docker": containerVerbs, "podman": containerVerbs, "nerdctl": containerVerbs, "docker-compose": containerVerbs,
	"podman-compose": containerVerbs, "ctr": containerVerbs, "crictl": containerVerbs,
	"kubectl": kubeVerbs, "oc": kubeVerbs, "k": kubeVerbs, "microk8s.kubectl": kubeVerbs,
	"aws": awsLike, "gcloud": awsLike, "az": awsLike, "gsutil": awsLike, "s3cmd": awsLike, "mc": awsLike,
	"doctl": awsLike, "linode-cli": awsLike, "hcloud": awsLike, "scw": awsLike, "ibmcloud": awsLike, "oci": awsLike,
	"gh": ghLike, "glab": ghLike,
	"terraform": terraformVerbs, "tofu": terraformVerbs, "terragrunt": terraformVerbs, "pulumi": terraformVerbs,
	"azcopy": {also: cloudCopy}, "rclone": rcloneVerbs, "helm": genericDelete, "heroku": genericDelete, "flyctl": genericDelete, "fly": genericDelete,
	"vercel": genericDelete, "netlify": genericDelete, "vagrant": genericDelete, "virsh": genericDelete,
	"lxc": genericDelete, "incus": genericDelete, "multipass": genericDelete, "minikube": genericDelete, "kind": genericDelete,
	"k3d": genericDelete, "eksctl": genericDelete, "nomad": genericDelete, "consul": genericDelete, "vault": genericDelete,
	"etcdctl": genericDelete, "firebase": genericDelete, "supabase": genericDelete, "serverless": genericDelete, "sls": genericDelete,
	"cdk": genericDelete, "kubeadm": genericDelete, "argocd": genericDelete,
}

func init() {
	registerVerbs(infraCLIs)
}

// hostAccess flags a container run with the host's root, home or system
// directories mounted, or with the host's privileges: what runs inside is
// not analysed, and it reaches the host.
//
// A client pointed at a Unix socket of its own (-H unix:///…) talks to
// that service, outside the command: user-service.
func hostAccess(c *classifier, name string, args []arg, _ cmdCtx) {
	if h, ok := optsOf(args, containerSpec).get("H", "--host", "--url"); ok && strings.HasPrefix(h, "unix://") {
		c.add(RiskDangerous, KeyUserService, fmt.Sprintf("talks to the container service behind a named socket (%s -H %s)", name, h))
	}
	_, ops := parseAll(args, containerSpec)
	if len(ops) == 0 || ops[0].s != "run" && ops[0].s != "create" && ops[0].s != "exec" {
		return
	}
	eachOpt(args, containerSpec, func(k, v string) {
		src, _, _ := strings.Cut(v, ":")
		if k == "--mount" {
			for _, f := range strings.Split(v, ",") {
				if s, ok := strings.CutPrefix(f, "source="); ok {
					src = s
				} else if s, ok := strings.CutPrefix(f, "src="); ok {
					src = s
				}
			}
		}
		switch {
		case (k == "v" || k == "--volume" || k == "--mount") && src != "" && (c.critical(src, true) || src == "/"):
			c.add(RiskDangerous, KeySystemState, fmt.Sprintf("runs a container with the host's %s mounted (%s -v %s)", src, name, v))
		case k == "--privileged" || k == "--pid" && v == "host" || k == "--cap-add" && strings.EqualFold(v, "ALL"):
			c.add(RiskDangerous, KeySystemState, fmt.Sprintf("runs a container with the host's privileges (%s %s)", name, k))
		}
	})
}
