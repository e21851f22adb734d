// Package slurm holds the checks of the scale-out recipes outside the
// ppl-slurm command: the Kubernetes manifests in deploy/kubernetes.
package slurm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	k8sjson "sigs.k8s.io/json"
	k8syaml "sigs.k8s.io/yaml"
)

const manifests = "../deploy/kubernetes"

// objects are the manifests' objects, decoded into Kubernetes' own types
// and keyed by name.
type objects struct {
	configMaps map[string]*corev1.ConfigMap
	claims     map[string]*corev1.PersistentVolumeClaim
	jobs       map[string]*batchv1.Job
}

// decode decodes one manifest document into its Kubernetes type strictly,
// as the API server's strict field validation (kubectl's default) does,
// with the server's own JSON decoder (sigs.k8s.io/json: field names are
// case-sensitive): a field the type does not have, a value of the wrong
// type or a key given twice is an error. It returns the object, its kind and its name.
func decode(doc []byte) (any, string, string, error) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := k8syaml.Unmarshal(doc, &meta); err != nil {
		return nil, "", "", err
	}
	if meta.APIVersion == "" || meta.Kind == "" || meta.Metadata.Name == "" {
		return nil, "", "", errors.New("apiVersion, kind and metadata.name are required")
	}
	var obj any
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 ConfigMap":
		obj = new(corev1.ConfigMap)
	case "v1 PersistentVolumeClaim":
		obj = new(corev1.PersistentVolumeClaim)
	case "batch/v1 Job":
		obj = new(batchv1.Job)
	default:
		return nil, "", "", fmt.Errorf("%s %s: not a kind these manifests use", meta.APIVersion, meta.Kind)
	}
	js, err := k8syaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
	}
	strict, err := k8sjson.UnmarshalStrict(js, obj)
	if err == nil {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err)
	}
	return obj, meta.Kind, meta.Metadata.Name, nil
}

// load reads every document of every manifest with decode.
func load(t *testing.T) objects {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if len(paths) == 0 {
		t.Fatalf("no manifests in %s", manifests)
	}
	objs := objects{map[string]*corev1.ConfigMap{}, map[string]*corev1.PersistentVolumeClaim{}, map[string]*batchv1.Job{}}
	seen := map[string]bool{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			obj, kind, name, err := decode([]byte(doc))
			if err != nil {
				t.Fatalf("%s, document %d: %v", p, i+1, err)
			}
			if key := kind + "/" + name; seen[key] {
				t.Fatalf("%s: %s defined twice", p, key)
			} else {
				seen[key] = true
			}
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				objs.configMaps[name] = o
			case *corev1.PersistentVolumeClaim:
				objs.claims[name] = o
			case *batchv1.Job:
				objs.jobs[name] = o
			}
		}
	}
	return objs
}

// TestDecodeStrict: the decoding load relies on refuses what the API
// server's strict validation refuses, so that the checks below read the
// manifests as Kubernetes will.
func TestDecodeStrict(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(manifests, "shard-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := decode(data); err != nil {
		t.Fatalf("shard-job.yaml: %v", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"completionMode: Indexed", "completionMod: Indexed", `unknown field "spec.completionMod"`},
		{"backoffLimitPerIndex: 2", "backoffLimitPerIndex: two", "spec.backoffLimitPerIndex"},
		{"restartPolicy: Never", "restartPolicy: Never\n      restartPolicy: Never", `"restartPolicy" already set`},
		{"          envFrom:", "          envfrom:", `unknown field "spec.template.spec.containers[0].envfrom"`},
		{"kind: Job", "kind: CronJob", "batch/v1 CronJob: not a kind"},
	} {
		doc := strings.Replace(string(data), tc.from, tc.to, 1)
		if doc == string(data) {
			t.Fatalf("shard-job.yaml has no %q", tc.from)
		}
		if _, _, _, err := decode([]byte(doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q → %q: error %v, want one containing %q", tc.from, tc.to, err, tc.want)
		}
	}
}

func TestKubernetesManifests(t *testing.T) {
	objs := load(t)
	cm, ok := objs.configMaps["ppl-run"]
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
	if pvc, ok := objs.claims["ppl-shared"]; !ok || len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("PersistentVolumeClaim ppl-shared: want one ReadWriteMany claim, got %+v", pvc)
	}

	jobs := map[string]string{"ppl-tokenize": "ppl-tokenize", "ppl-shard": "ppl-score", "ppl-merge": "ppl-aggregate"}
	for name, tool := range jobs {
		j, ok := objs.jobs[name]
		if !ok {
			t.Errorf("no Job %s", name)
			continue
		}
		if j.APIVersion != "batch/v1" {
			t.Errorf("Job %s: apiVersion %s", name, j.APIVersion)
		}
		ps := j.Spec.Template.Spec
		if ps.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("Job %s: restartPolicy %q, want Never (a retry is a new pod)", name, ps.RestartPolicy)
		}
		if len(ps.Containers) != 1 {
			t.Fatalf("Job %s: %d containers", name, len(ps.Containers))
		}
		c := ps.Containers[0]
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != "ppl-run" {
			t.Errorf("Job %s: envFrom %+v, want the ConfigMap ppl-run", name, c.EnvFrom)
		}
		vols := map[string]string{}
		for _, v := range ps.Volumes {
			if v.PersistentVolumeClaim != nil {
				vols[v.Name] = v.PersistentVolumeClaim.ClaimName
			}
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

	sj, ok := objs.jobs["ppl-shard"]
	if !ok {
		t.Fatal("no Job ppl-shard")
	}
	if m := sj.Spec.CompletionMode; m == nil || *m != batchv1.IndexedCompletion {
		t.Errorf("Job ppl-shard: completionMode %v, want Indexed", m)
	}
	if sj.Spec.Completions == nil || int(*sj.Spec.Completions) != shards || sj.Spec.Parallelism == nil || int(*sj.Spec.Parallelism) != shards {
		t.Errorf("Job ppl-shard: completions %v, parallelism %v; want SHARDS = %d", sj.Spec.Completions, sj.Spec.Parallelism, shards)
	}
	if sj.Spec.BackoffLimitPerIndex == nil || *sj.Spec.BackoffLimitPerIndex < 1 {
		t.Errorf("Job ppl-shard: backoffLimitPerIndex %v, want retries per shard", sj.Spec.BackoffLimitPerIndex)
	}
	if p := sj.Spec.PodFailurePolicy; p == nil || len(p.Rules) == 0 || p.Rules[0].Action != batchv1.PodFailurePolicyActionIgnore ||
		len(p.Rules[0].OnPodConditions) == 0 || p.Rules[0].OnPodConditions[0].Type != corev1.DisruptionTarget {
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
	if merge := objs.jobs["ppl-merge"].Spec.Template.Spec.Containers; len(merge) == 1 && !strings.Contains(merge[0].Command[2], `missing+=("$k/$SHARDS")`) {
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
		cmd := exec.Command("bash", "-c", objs.jobs[job].Spec.Template.Spec.Containers[0].Command[2])
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
