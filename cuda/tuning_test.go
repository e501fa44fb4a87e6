package cuda

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// tunedEngines are the engines tuned has registered, by name.
var (
	tunedMu      sync.Mutex
	tunedEngines = map[string]bool{}
)

// tuned returns the name of an engine like the engine called name (a host
// engine of the tests or one the package registers) whose plans run with
// Tuning tun, registering it on first use. It shares name's backend. On
// the engines the package registers (a device's) it sets WaitForCompile
// unless tun.tierMin is set.
func tuned(t testing.TB, name string, tun Tuning) string {
	t.Helper()
	var base *Engine
	for _, e := range append([]*Engine{hostF64, hostF32, hostSim, hostSimBig, residentEngine, stagingEngine, hostWork, slowWork, hostReads, busWork, deviceWork, countsF64, slowCountsF64}, registered...) {
		if e.name == name {
			base = e
		}
	}
	if base == nil {
		t.Fatalf("tuned: no engine %q", name)
	}
	if tun == (Tuning{}) {
		return name
	}
	if slices.Contains(registered, base) && tun.tierMin == 0 {
		// A device's engines wait for their compiles (see TestMain);
		// tierMin asks for tiered first calls.
		tun.WaitForCompile = true
	}
	tn := fmt.Sprintf("%s/%s", name, tun.Layout)
	for _, f := range []struct {
		on   bool
		name string
	}{{tun.NoBlockAcc, "noblockacc"}, {tun.TileAccGlobal, "tileaccglobal"}, {tun.TileShGlobal, "tileshglobal"}, {tun.TileStatic, "tilestatic"}, {tun.NoChunkLaunch, "nochunklaunch"}, {tun.NoChunkStage, "nochunkstage"}, {tun.separateSteps, "separate"}, {tun.unrolled, "unrolled"}, {tun.Minimal, "minimal"}, {tun.SplitUnits, "splitunits"}, {tun.NoWide, "nowide"}, {tun.NoWideStiff, "nowidestiff"}, {tun.NoWidePrivate, "nowideprivate"}, {tun.wideLoops, "wideloops"}, {tun.wideRound, "wideround"}, {tun.threadRound, "threadround"}, {tun.wideTables, "widetables"}, {tun.wideRolled, "widerolled"}, {tun.wideBlocked, "wideblocked"}, {tun.wideCyclicWindows, "widecyclicwindows"}, {tun.wideRecY, "widerecy"}, {tun.wideOutPlace, "wideoutplace"}, {tun.NoTrainGraph, "notraingraph"}, {tun.StoreSaveCots, "storesavecots"}, {tun.ungroupedCots, "ungroupedcots"}, {tun.keepThetas, "keepthetas"}, {tun.divideSaves, "dividesaves"}, {tun.deferSaves, "defersaves"}, {tun.NoInputReuse, "noinputreuse"}, {tun.generic, "generic"}, {tun.compareEach, "compareeach"}, {tun.compareNoHelp, "comparenohelp"}, {tun.checkLaneAtomics, "checklaneatomics"}, {tun.checkMemset, "checkmemset"}, {tun.uploadShared, "uploadshared"}, {tun.oldSaves, "oldsaves"}, {tun.endsInScatter, "endsinscatter"}, {tun.shortStage, "shortstage"}, {tun.shortScatter, "shortscatter"}, {tun.stageParts, "stageparts"}, {tun.denseLU, "denselu"}, {tun.noProbe, "noprobe"}, {tun.WaitForCompile, "wait"}} {
		if f.on {
			tn += "," + f.name
		}
	}
	for _, f := range []struct {
		v    int64
		name string
	}{{int64(tun.firstRows), "rows"}, {int64(tun.meshChunk), "chunk"}, {tun.maxStaging, "staging"}, {int64(tun.maxSource), "source"}, {int64(tun.bcastSeed), "bcast"}, {int64(tun.pipeChunk), "pipe"}, {int64(tun.pipeMin), "pipemin"}, {int64(tun.splitMin), "splitmin"}, {int64(tun.saveGroup), "savegroup"}, {int64(tun.wideFill), "widefill"}, {int64(tun.wideLanes), "widelanes"}, {int64(tun.wideWarps), "widewarps"}, {int64(tun.tierMin), "tiermin"}, {int64(tun.hostWorkers), "workers"}, {int64(tun.headsWorkers), "heads"}} {
		if f.v != 0 {
			tn += fmt.Sprintf(",%s=%d", f.name, f.v)
		}
	}
	if tun.splitMin < 0 {
		tn += ",nosplit"
	}
	if tun.WideScalars != 0 {
		tn += fmt.Sprintf(",widescalars=%d", tun.WideScalars)
	}
	if tun.WideMinBlocks != 0 {
		tn += fmt.Sprintf(",wideblocks=%d", tun.WideMinBlocks)
	}
	if tun.WideMinSplit != 0 {
		tn += fmt.Sprintf(",widesplit=%d", tun.WideMinSplit)
	}
	if tun.SplitFrom != 0 {
		tn += fmt.Sprintf(",split=%d", tun.SplitFrom)
	}
	if tun.widePivots != 0 {
		tn += fmt.Sprintf(",pivots=%q", tun.widePivots)
	}
	if tun.FastCompile != "" || tun.FastCompileFrom != 0 {
		tn += fmt.Sprintf(",fast=%q from %d", tun.FastCompile, tun.FastCompileFrom)
	}
	tunedMu.Lock()
	defer tunedMu.Unlock()
	if !tunedEngines[tn] {
		be, err := base.backend()
		if err != nil {
			t.Fatalf("tuned %s: %v", tn, err)
		}
		e := &Engine{name: tn, ordinal: base.ordinal, prec: base.prec, be: be}
		e.SetTuning(tun)
		ode.Register(e)
		tunedEngines[tn] = true
	}
	return tn
}
