package kernelgen

import "testing"

// TestAssignStages: staged vectors whose spans overlap get distinct
// slots, a slot serves vectors one after another, a function's slots
// start above its callees' (base), and a vector that finds no free slot
// keeps the shuffles.
func TestAssignStages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		last  []int // per vector; staged at 10q
		base  int
		slots []int // -1: shuffled
		top   int
	}{
		{"disjoint", []int{5, 15, 25}, 0, []int{0, 0, 0}, 1},
		{"nested", []int{100, 15, 25}, 0, []int{0, 1, 1}, 2},
		{"above callees", []int{100, 15}, 2, []int{2, 3}, 4},
		{"full", []int{100, 100, 100, 100, 100}, 0, []int{0, 1, 2, 3, -1}, 4},
		{"full above callees", []int{100, 100}, 3, []int{3, -1}, 4},
		{"none free", []int{100}, LaneStageSlots, []int{-1}, LaneStageSlots},
	} {
		var spans []stageSpan
		for q, l := range c.last {
			spans = append(spans, stageSpan{vec: q, first: 10 * q, last: l})
		}
		slots, top := assignStages(spans, c.base)
		if top != c.top {
			t.Errorf("%s: top %d, want %d", c.name, top, c.top)
		}
		for q, want := range c.slots {
			if slots[q] != want {
				t.Errorf("%s: vector %d: slot %d, want %d", c.name, q, slots[q], want)
			}
		}
	}
}
