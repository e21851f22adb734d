// Package slurm holds the checks of the scale-out recipes outside the
// ppl-slurm command: the Kubernetes manifests in deploy/kubernetes.
package slurm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const manifests = "../deploy/kubernetes"

// object is the part of a Kubernetes object the checks read.
type object struct {
	APIVersion string                `yaml:"apiVersion"`
	Kind       string                `yaml:"kind"`
	Metadata   struct{ Name string } `yaml:"metadata"`
	Data       map[string]string     `yaml:"data"`
	Spec       struct {
		CompletionMode       string   `yaml:"completionMode"`
		Completions          *int     `yaml:"completions"`
		Parallelism          *int     `yaml:"parallelism"`
		BackoffLimit         *int     `yaml:"backoffLimit"`
		BackoffLimitPerIndex *int     `yaml:"backoffLimitPerIndex"`
		AccessModes          []string `yaml:"accessModes"`
		PodFailurePolicy     *struct {
			Rules []struct {
				Action          string                  `yaml:"action"`
				OnPodConditions []struct{ Type string } `yaml:"onPodConditions"`
			} `yaml:"rules"`
		} `yaml:"podFailurePolicy"`
		Template struct {
			Spec struct {
				RestartPolicy string `yaml:"restartPolicy"`
				Containers    []struct {
					Name    string   `yaml:"name"`
					Image   string   `yaml:"image"`
					Command []string `yaml:"command"`
					EnvFrom []struct {
						ConfigMapRef struct{ Name string } `yaml:"configMapRef"`
					} `yaml:"envFrom"`
					Resources struct {
						Limits map[string]any `yaml:"limits"`
					} `yaml:"resources"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name                  string `yaml:"name"`
					PersistentVolumeClaim struct {
						ClaimName string `yaml:"claimName"`
					} `yaml:"persistentVolumeClaim"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// load reads every document of every manifest, strictly: a misspelt
// field of the parts above is an error, as kubectl's strict decoding
// would make it.
func load(t *testing.T) map[string]object {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if len(paths) == 0 {
		t.Fatalf("no manifests in %s", manifests)
	}
	objs := map[string]object{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		d := yaml.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var o object
			err := d.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s, document %d: %v", p, i+1, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s, document %d: apiVersion, kind and metadata.name are required", p, i+1)
			}
			key := o.Kind + "/" + o.Metadata.Name
			if _, dup := objs[key]; dup {
				t.Fatalf("%s: %s defined twice", p, key)
			}
			objs[key] = o
		}
	}
	return objs
}

func TestKubernetesManifests(t *testing.T) {
	objs := load(t)
	cm, ok := objs["ConfigMap/ppl-run"]
	if !ok {
		t.Fatal("no ConfigMap ppl-run")
	}
	for _, k := range []string{"SHARDS", "RUN_DIR", "MODEL", "TOKENIZE_ARGS", "WINDOW_ARGS", "SCORE_ARGS", "AGGREGATE_ARGS"} {
		if _, ok := cm.Data[k]; !ok {
			t.Errorf("ConfigMap ppl-run has no %s", k)
		}
	}
	shards, err := strconv.Atoi(cm.Data["SHARDS"])
	if err != nil || shards < 1 {
		t.Fatalf("SHARDS %q", cm.Data["SHARDS"])
	}
	pvc, ok := objs["PersistentVolumeClaim/ppl-shared"]
	if !ok || len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != "ReadWriteMany" {
		t.Errorf("PersistentVolumeClaim ppl-shared: want one ReadWriteMany claim, got %+v", pvc.Spec.AccessModes)
	}

	jobs := map[string]string{"ppl-tokenize": "ppl-tokenize", "ppl-shard": "ppl-score", "ppl-merge": "ppl-aggregate"}
	for name, tool := range jobs {
		j, ok := objs["Job/"+name]
		if !ok {
			t.Errorf("no Job %s", name)
			continue
		}
		if j.APIVersion != "batch/v1" {
			t.Errorf("Job %s: apiVersion %s", name, j.APIVersion)
		}
		ps := j.Spec.Template.Spec
		if ps.RestartPolicy != "Never" {
			t.Errorf("Job %s: restartPolicy %q, want Never (a retry is a new pod)", name, ps.RestartPolicy)
		}
		if len(ps.Containers) != 1 {
			t.Fatalf("Job %s: %d containers", name, len(ps.Containers))
		}
		c := ps.Containers[0]
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef.Name != "ppl-run" {
			t.Errorf("Job %s: envFrom %+v, want the ConfigMap ppl-run", name, c.EnvFrom)
		}
		vols := map[string]string{}
		for _, v := range ps.Volumes {
			vols[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/shared" || vols[c.VolumeMounts[0].Name] != "ppl-shared" {
			t.Errorf("Job %s: mounts %+v of volumes %v, want claim ppl-shared at /shared", name, c.VolumeMounts, vols)
		}
		if len(c.Command) != 3 || c.Command[0] != "/bin/bash" || c.Command[1] != "-c" {
			t.Fatalf("Job %s: command %q, want /bin/bash -c SCRIPT", name, c.Command)
		}
		script := c.Command[2]
		if !strings.Contains(script, tool+" ") {
			t.Errorf("Job %s does not run %s:\n%s", name, tool, script)
		}
		if bash, err := exec.LookPath("bash"); err == nil {
			if out, err := exec.Command(bash, "-n", "-c", script).CombinedOutput(); err != nil {
				t.Errorf("Job %s: the script is not valid bash: %v\n%s", name, err, out)
			}
		}
		// Every variable the script reads comes from the ConfigMap, from
		// Kubernetes (HOSTNAME, JOB_COMPLETION_INDEX) or from the script.
		for _, m := range regexp.MustCompile(`\$\{?([A-Z_]+)`).FindAllStringSubmatch(script, -1) {
			if _, ok := cm.Data[m[1]]; !ok && m[1] != "HOSTNAME" && !(m[1] == "JOB_COMPLETION_INDEX" && name == "ppl-shard") {
				t.Errorf("Job %s reads $%s, which neither the ConfigMap nor Kubernetes sets", name, m[1])
			}
		}
	}

	sj := objs["Job/ppl-shard"]
	if sj.Spec.CompletionMode != "Indexed" {
		t.Errorf("Job ppl-shard: completionMode %q, want Indexed", sj.Spec.CompletionMode)
	}
	if sj.Spec.Completions == nil || *sj.Spec.Completions != shards || sj.Spec.Parallelism == nil || *sj.Spec.Parallelism != shards {
		t.Errorf("Job ppl-shard: completions %v, parallelism %v; want SHARDS = %d", sj.Spec.Completions, sj.Spec.Parallelism, shards)
	}
	if sj.Spec.BackoffLimitPerIndex == nil || *sj.Spec.BackoffLimitPerIndex < 1 {
		t.Errorf("Job ppl-shard: backoffLimitPerIndex %v, want retries per shard", sj.Spec.BackoffLimitPerIndex)
	}
	if p := sj.Spec.PodFailurePolicy; p == nil || len(p.Rules) == 0 || p.Rules[0].Action != "Ignore" ||
		len(p.Rules[0].OnPodConditions) == 0 || p.Rules[0].OnPodConditions[0].Type != "DisruptionTarget" {
		t.Errorf("Job ppl-shard: podFailurePolicy %+v, want evictions ignored", p)
	}
	c := sj.Spec.Template.Spec.Containers[0]
	if _, ok := c.Resources.Limits["nvidia.com/gpu"]; !ok {
		t.Errorf("Job ppl-shard: no nvidia.com/gpu limit")
	}
	script := c.Command[2]
	for _, want := range []string{
		"k=$((JOB_COMPLETION_INDEX + 1))",
		`--shard "$k/$SHARDS" "$RUN_DIR/tokens.ndjson"`,
		`--cache-dir "$RUN_DIR/cache" > "$tmp"`,
		`mv -f "$tmp" "$out"`,
		`if [ -s "$out" ]`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("Job ppl-shard's script lacks %q:\n%s", want, script)
		}
	}
	if merge := objs["Job/ppl-merge"].Spec.Template.Spec.Containers; len(merge) == 1 && !strings.Contains(merge[0].Command[2], `missing+=("$k/$SHARDS")`) {
		t.Errorf("Job ppl-merge does not check for missing shards")
	}
}

// TestKubernetesShardScript runs the shard and merge Jobs' scripts with
// bash on stand-in tools, as the pods would: JOB_COMPLETION_INDEX i makes
// shard i+1, and the merge reads every shard.
func TestKubernetesShardScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	objs := load(t)
	bin := t.TempDir()
	for name, body := range map[string]string{
		"ppl-window":    `echo "window $*"`,
		"ppl-score":     `cat; echo "score $*"`,
		"ppl-aggregate": `out=$2; shift 2; mkdir -p "$out"; cat "$@" > "$out/report.json"; echo table`,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runDir := t.TempDir()
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "RUN_DIR="+runDir, "SHARDS=2", "MODEL=/m.gguf",
		"WINDOW_ARGS=--context 64", "SCORE_ARGS=--kv-dtype int8", "AGGREGATE_ARGS=", "HOSTNAME=pod")
	sh := func(job string, extra ...string) (string, error) {
		cmd := exec.Command("bash", "-c", objs["Job/"+job].Spec.Template.Spec.Containers[0].Command[2])
		cmd.Env = append(env, extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := sh("ppl-merge"); err == nil || !strings.Contains(out, "shard 1/2 2/2 missing") {
		t.Errorf("merge before the shards: %v\n%s", err, out)
	}
	for i := range 2 {
		if out, err := sh("ppl-shard", "JOB_COMPLETION_INDEX="+strconv.Itoa(i)); err != nil {
			t.Fatalf("index %d: %v\n%s", i, err, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(runDir, "shards", "shard-2-of-2.ndjson"))
	if want := "window --context 64 --shard 2/2 " + runDir + "/tokens.ndjson\nscore --model /m.gguf --kv-dtype int8 --cache-dir " + runDir + "/cache\n"; err != nil || string(data) != want {
		t.Errorf("shard 2: %q, %v; want %q", data, err, want)
	}
	if out, err := sh("ppl-merge"); err != nil || !strings.Contains(out, "report: "+runDir+"/report/report.json\ntable") {
		t.Errorf("merge: %v\n%s", err, out)
	}
}
