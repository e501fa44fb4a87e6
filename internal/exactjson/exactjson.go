// Package exactjson encodes float64 slices as JSON that decodes bit for
// bit: finite values as numbers in Go's shortest round-trip form
// (strconv.FormatFloat(x, 'g', -1, 64)), and NaN, +Inf and −Inf, which
// JSON lacks, as the strings "NaN", "+Inf" and "-Inf". The optimiser
// state files (package optim) and weight files (package nn) use it, and
// DecodeOne to read them.
package exactjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Floats is a []float64 with the exact JSON encoding of the package doc.
// A nil Floats encodes as null.
type Floats []float64

// MarshalJSON encodes f.
func (f Floats) MarshalJSON() ([]byte, error) {
	if f == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+24*len(f))
	b = append(b, '[')
	for i, x := range f {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendFloat(b, x)
	}
	return append(b, ']'), nil
}

// appendFloat appends x's encoding to b.
func appendFloat(b []byte, x float64) []byte {
	switch {
	case math.IsNaN(x):
		return append(b, `"NaN"`...)
	case math.IsInf(x, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(x, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, x, 'g', -1, 64)
}

// parseFloat decodes one value that appendFloat writes (a number or one
// of the three strings).
func parseFloat(r json.RawMessage) (float64, error) {
	s := string(r)
	if len(s) > 0 && s[0] == '"' {
		if err := json.Unmarshal(r, &s); err != nil {
			return 0, err
		}
		switch s {
		case "NaN", "+Inf", "-Inf":
		default:
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	return strconv.ParseFloat(s, 64)
}

// Float is a float64 with the exact JSON encoding of the package doc, for
// a single value (as a struct field) that may be non-finite.
type Float float64

// MarshalJSON encodes x.
func (x Float) MarshalJSON() ([]byte, error) { return appendFloat(nil, float64(x)), nil }

// UnmarshalJSON decodes what MarshalJSON writes.
func (x *Float) UnmarshalJSON(b []byte) error {
	v, err := parseFloat(b)
	if err != nil {
		return err
	}
	*x = Float(v)
	return nil
}

// UnmarshalJSON decodes what MarshalJSON writes.
func (f *Floats) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*f = nil
		return nil
	}
	out := make(Floats, len(raw))
	for i, r := range raw {
		x, err := parseFloat(r)
		if err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = x
	}
	*f = out
	return nil
}

// DecodeOne decodes the one JSON object that r holds into v, refusing
// unknown fields and anything after the object. Its errors say what is
// wrong with the file, in words, for a file of the given kind ("state",
// "weights") that save writes: empty, cut short, not JSON, more than one
// object.
func DecodeOne(r io.Reader, v any, kind, save string) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF):
			return fmt.Errorf("the input is empty (%w); want the JSON object %s writes", err, save)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("the %s is cut short (%w): the file is truncated or was not written completely; save the %s again", kind, err, kind)
		case errors.As(err, &syn):
			return fmt.Errorf("not a %s file (%w at byte %d); want the JSON object %s writes", kind, err, syn.Offset, save)
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("the file holds more after the first %s (two saves concatenated?); keep one %s per file", kind, kind)
	}
	return nil
}
