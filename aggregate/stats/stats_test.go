package stats

import (
	"math"
	"testing"
)

func TestSumCompensates(t *testing.T) {
	// 1 + 1e-16 added 1e6 times: a naive sum never moves off 1.
	var k Sum
	k.Add(1)
	for i := 0; i < 1000000; i++ {
		k.Add(1e-16)
	}
	if got, want := k.Value(), 1+1e-10; math.Abs(got-want) > 1e-22 {
		t.Errorf("sum = %.17g, want %.17g", got, want)
	}
	// Neumaier's case that plain Kahan gets wrong.
	if got := SumOf([]float64{1, 1e100, 1, -1e100}); got != 2 {
		t.Errorf("SumOf = %v, want 2", got)
	}
}

func TestPercentile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q    float64
		want float64
	}{
		{0, 1}, {0.001, 1}, {0.1, 1}, {0.11, 2}, {0.5, 5}, {0.9, 9}, {0.95, 10}, {0.99, 10}, {1, 10},
	} {
		if got := Percentile(s, c.q); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := Percentile([]float64{7}, 0.99); got != 7 {
		t.Errorf("single value: %v", got)
	}
}

func TestMeanSE(t *testing.T) {
	// σ² = 1.25 (population), se = sqrt(1.25/3).
	m, se := MeanSE([]float64{1, 2, 3, 4})
	if m != 2.5 || math.Abs(se-math.Sqrt(1.25/3)) > 1e-15 {
		t.Errorf("MeanSE = %v, %v", m, se)
	}
	if _, se := MeanSE([]float64{3}); se != 0 {
		t.Errorf("one value: se %v", se)
	}
	// Perfectly correlated pairs: the covariance equals the variance of the mean.
	x := []float64{1, 2, 3, 4}
	if c := CovMean(x, x); math.Abs(c-1.25/3) > 1e-15 {
		t.Errorf("CovMean = %v", c)
	}
}

// The generator is specified in full: these are SplitMix64's published
// first outputs for seed 1234567.
func TestRandReference(t *testing.T) {
	r := NewRand(1234567)
	want := []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821}
	for i, w := range want {
		if got := r.Uint64(); got != w {
			t.Fatalf("output %d = %d, want %d", i, got, w)
		}
	}
}

func TestIntNUniform(t *testing.T) {
	r := NewRand(1)
	var counts [7]int
	for i := 0; i < 70000; i++ {
		counts[r.IntN(7)]++
	}
	for i, c := range counts {
		if c < 9500 || c > 10500 {
			t.Errorf("bucket %d: %d of 70000", i, c)
		}
	}
}

func TestReplicatesDeterministic(t *testing.T) {
	num := []float64{10, 20, 30, 40}
	den := []float64{5, 5, 5, 5}
	a := Replicates(num, den, 200, NewRand(Seed(1, "x")))
	b := Replicates(num, den, 200, NewRand(Seed(1, "x")))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("replicate %d differs: %v vs %v", i, a[i], b[i])
		}
	}
	iv := Summarize(a)
	if !(iv.Lo >= 2 && iv.Lo < 5 && iv.Hi > 5 && iv.Hi <= 8 && iv.SE > 0) {
		t.Errorf("interval %+v", iv)
	}
	if Replicates(num[:1], den[:1], 100, NewRand(1)) != nil {
		t.Error("one block should give no replicates")
	}
	if Seed(1, "a") == Seed(1, "b") || Seed(1, "a") == Seed(2, "a") {
		t.Error("seeds collide")
	}
}
