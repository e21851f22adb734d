package cli

import (
	"testing"

	"ppl.dev/pipe"
)

// The progress total is this shard's share of the window header's count.
func TestShardWindows(t *testing.T) {
	for _, c := range []struct {
		p    pipe.Protocol
		want int
	}{
		{pipe.Protocol{}, 0},
		{pipe.Protocol{Windows: 5}, 5},
		{pipe.Protocol{Windows: 5, Shard: "1/2"}, 3},
		{pipe.Protocol{Windows: 5, Shard: "2/2"}, 2},
		{pipe.Protocol{Windows: 1, Shard: "3/3"}, 0},
		{pipe.Protocol{Windows: 26, Shard: "2/3", Split: &pipe.Split{By: "cost", Windows: []int{8, 9, 9}}}, 9},
	} {
		if got := shardWindows(&c.p); got != c.want {
			t.Errorf("%+v: %d windows, want %d", c.p, got, c.want)
		}
	}
}
