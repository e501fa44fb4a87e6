package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
)

// jsonField is one key of a jsonObject.
type jsonField struct {
	Key   string
	Value any
}

// jsonObject is a JSON object whose keys are written in order.
type jsonObject []jsonField

// MarshalJSON writes the fields in order.
func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", f.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonFloat is a number that is written as null if it is NaN or infinite
// (JSON has no such numbers), and otherwise in the shortest form that
// reads back exactly.
type jsonFloat float64

// MarshalJSON writes x, or null if x is not finite.
func (x jsonFloat) MarshalJSON() ([]byte, error) {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// jsonFloats is a list of jsonFloat; a nil list is written as null.
type jsonFloats []float64

// MarshalJSON writes the list, non-finite elements as null.
func (xs jsonFloats) MarshalJSON() ([]byte, error) {
	if xs == nil {
		return []byte("null"), nil
	}
	b := []byte{'['}
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		v, _ := jsonFloat(x).MarshalJSON()
		b = append(b, v...)
	}
	return append(b, ']'), nil
}

// encodeJSON writes v to w, indented, and a newline.
func encodeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeJSON writes v, indented, and a newline, and returns the exit
// status of a successful command (or exitFail if writing fails).
func writeJSON(stdout, stderr io.Writer, v any) int {
	if err := encodeJSON(stdout, v); err != nil {
		fmt.Fprintf(stderr, "gradsolve: writing JSON: %v\n", err)
		return exitFail
	}
	return exitOK
}
