package cuda

import (
	"cmp"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// opProfile is PPL_CUDA_PROFILE=1's account of where a run's time goes:
// each backend operation's wall time with the device synchronized after
// it (its kernels' device time, their launches included, no longer hidden
// behind the host's next launches), summed by kind (its label with the
// layer's and expert's numbers taken out), and the host's time between
// operations within a window (routing a mixture of experts, the model's
// own code). The synchronizations make the run slower than an unprofiled
// one; the shares are what to read.
type opProfile struct {
	kinds map[string]*opTime
	host  time.Duration
	last  time.Time // the end of the previous operation of the window; zero at its start
}

type opTime struct {
	calls int
	took  time.Duration
}

// profileFromEnv is a new profile when $PPL_CUDA_PROFILE is "1", else nil.
func profileFromEnv() *opProfile {
	if os.Getenv("PPL_CUDA_PROFILE") != "1" {
		return nil
	}
	return newProfile()
}

func newProfile() *opProfile { return &opProfile{kinds: map[string]*opTime{}} }

var numbers = regexp.MustCompile(`\d+`)

// kind is an operation's label without its numbers: "product
// blk.N.attn_q.weight", "layer N attention".
func kind(what string) string { return numbers.ReplaceAllString(what, "N") }

// add counts an operation that ran from t0 to t1.
func (p *opProfile) add(what string, t0, t1 time.Time) {
	if !p.last.IsZero() {
		p.host += t0.Sub(p.last)
	}
	p.last = t1
	k := kind(what)
	o := p.kinds[k]
	if o == nil {
		o = &opTime{}
		p.kinds[k] = o
	}
	o.calls++
	o.took += t1.Sub(t0)
}

// window marks the start of a window: the host's time before it is not
// counted.
func (p *opProfile) window() { p.last = time.Time{} }

// table is the profile's most expensive kinds, at most top of them, one
// line each, then the host's time and the rest.
func (p *opProfile) table(top int) string {
	total := p.host
	var ks []string
	for k, o := range p.kinds {
		total += o.took
		ks = append(ks, k)
	}
	if total == 0 {
		return "no operation profiled"
	}
	slices.SortFunc(ks, func(a, b string) int {
		return cmp.Or(cmp.Compare(p.kinds[b].took, p.kinds[a].took), strings.Compare(a, b))
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "time by operation (PPL_CUDA_PROFILE=1: the device synchronized after each; %.3f s in all):", total.Seconds())
	line := func(took time.Duration, calls int, what string) {
		fmt.Fprintf(&sb, "\n  %5.1f%% %9.3f s %8d× %s", 100*took.Seconds()/total.Seconds(), took.Seconds(), calls, what)
	}
	var rest time.Duration
	restCalls, restKinds := 0, 0
	for i, k := range ks {
		if i < top {
			line(p.kinds[k].took, p.kinds[k].calls, k)
			continue
		}
		rest += p.kinds[k].took
		restCalls += p.kinds[k].calls
		restKinds++
	}
	if restKinds > 0 {
		line(rest, restCalls, fmt.Sprintf("the %d other kinds", restKinds))
	}
	line(p.host, 0, "the host, between operations (routing, the model's code)")
	return sb.String()
}
