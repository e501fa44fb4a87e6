//go:build race

package par

// raceEnabled reports a build with the race detector, whose sync.Pool
// drops items at random (TestFirstEqualAllocs counts no allocations
// without it).
const raceEnabled = true
