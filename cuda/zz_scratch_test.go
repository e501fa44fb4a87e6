package cuda

import (
	"runtime"
	"testing"
)

func TestZZThreadSaves(t *testing.T) {
	old := runtime.GOMAXPROCS(16)
	defer runtime.GOMAXPROCS(old)
	c := wideSavesCase(300, 64)
	compareEngines(t, tuned(t, "cuda-host", Tuning{Layout: LayoutThread}), c, caseOpts{ops: []string{"grad"}})
}
