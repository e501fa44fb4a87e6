package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMemTotal(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       int64
		ok         bool
	}{
		{"typical", "MemTotal:       16303528 kB\nMemFree: 1 kB\n", 16303528 << 10, true},
		{"later line", "Foo: 1 kB\nMemTotal: 2 kB\n", 2048, true},
		{"no unit", "MemTotal: 2\n", 0, false},
		{"negative", "MemTotal: -2 kB\n", 0, false},
		{"overflow", "MemTotal: 9223372036854775807 kB\n", 0, false},
		{"missing", "MemFree: 1 kB\n", 0, false},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, ok := MemTotal(path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Case %v: MemTotal = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := MemTotal(filepath.Join(dir, "absent")); ok {
		t.Errorf("Case absent: MemTotal reported a size for a missing file")
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		b    float64
		want string
	}{
		{512, "512 bytes"},
		{1536, "1.5 KiB"},
		{3 << 30, "3 GiB"},
		{2.4e13, "21.8 TiB"},
	} {
		if got := Format(tc.b); got != tc.want {
			t.Errorf("Case %v: Format = %q, want %q", tc.b, got, tc.want)
		}
	}
}
