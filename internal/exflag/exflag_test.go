package exflag

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.png")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	png := []string{"png", "svg"}
	for _, tc := range []struct {
		name  string
		check Check
		want  string // in the error; "" for none
	}{
		{"count ok", AtLeast("n", 1, 1, "trajectory"), ""},
		{"count 0", AtLeast("n", 0, 1, "trajectory"), "-n 0: want at least 1 trajectory"},
		{"count negative", AtLeast("steps", -3, 1, "step"), "-steps -3"},
		{"positive", Positive("lr", 0.1), ""},
		{"positive 0", Positive("lr", 0), "-lr 0: want a positive finite number"},
		{"positive NaN", Positive("lr", math.NaN()), "-lr NaN"},
		{"positive Inf", Positive("lr", math.Inf(1)), "-lr +Inf"},
		{"non-negative 0", NonNegative("noise", 0), ""},
		{"non-negative -1", NonNegative("noise", -1), "-noise -1: want a finite number, 0 or more"},
		{"non-negative NaN", NonNegative("noise", math.NaN()), "-noise NaN"},
		{"finite", Finite("offset", -3), ""},
		{"finite NaN", Finite("offset", math.NaN()), "-offset NaN: want a finite number"},
		{"no output", Writable("plot", "", png), ""},
		{"new file", Writable("plot", filepath.Join(dir, "new.png"), png), ""},
		{"existing file", Writable("plot", existing, png), ""},
		{"upper-case extension", Writable("plot", filepath.Join(dir, "new.SVG"), png), ""},
		{"wrong extension", Writable("plot", filepath.Join(dir, "x.txt"), png), "want a file name ending in .png, .svg"},
		{"no extension", Writable("plot", filepath.Join(dir, "x"), png), "want a file name ending in"},
		{"any extension", Writable("weights", filepath.Join(dir, "w.json"), nil), ""},
		{"missing directory", Writable("plot", filepath.Join(dir, "no", "x.png"), png), "-plot: cannot write"},
		{"a directory", Writable("weights", dir, nil), "it is a directory"},
		{"no arguments", NoArgs(nil), ""},
		{"an argument", NoArgs([]string{"2"}), `unexpected argument "2"`},
	} {
		err := tc.check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Case %s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Case %s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	// Nothing was written: the old file is as it was, no new or temporary
	// file is left.
	if b, err := os.ReadFile(existing); err != nil || string(b) != "old" {
		t.Errorf("the existing file reads %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want only old.png", names)
	}
	if err := First(Positive("lr", 1), AtLeast("n", 0, 1, "trajectory"), Positive("lr", 0)); err == nil || !strings.HasPrefix(err.Error(), "-n 0") {
		t.Errorf("First: %v, want the first failing check's error", err)
	}
}
