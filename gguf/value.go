package gguf

import (
	"fmt"
	"math"
)

// ValueType is the type tag of a GGUF metadata value (gguf_type in gguf.h).
type ValueType uint32

// Metadata value types, numbered as in the GGUF specification.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	ValueUint8:   "uint8",
	ValueInt8:    "int8",
	ValueUint16:  "uint16",
	ValueInt16:   "int16",
	ValueUint32:  "uint32",
	ValueInt32:   "int32",
	ValueFloat32: "float32",
	ValueBool:    "bool",
	ValueString:  "string",
	ValueArray:   "array",
	ValueUint64:  "uint64",
	ValueInt64:   "int64",
	ValueFloat64: "float64",
}

// String returns the type's name ("uint32", "array"), or "valuetype(13)".
func (t ValueType) String() string {
	if uint64(t) < uint64(len(valueTypeNames)) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

// Known reports whether t is one of the 13 GGUF value types.
func (t ValueType) Known() bool { return t <= ValueFloat64 }

// fixedSize returns the encoded size of a scalar of type t, or 0 for string,
// array and unknown types.
func (t ValueType) fixedSize() int {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

// minSize returns the fewest bytes a value of type t can occupy: its size for
// scalars, the length prefix for strings, element type plus count for arrays.
// It is what bounds an array count by the bytes left in the file.
func (t ValueType) minSize() int {
	switch t {
	case ValueString:
		return 8
	case ValueArray:
		return 4 + 8
	}
	return t.fixedSize()
}

// Value is one decoded metadata value. Scalars hold the Go type of the same
// name (uint8 ... float64, bool, string). Arrays of a scalar type hold a
// typed slice ([]int32, []float32, ...), arrays of strings a *StringArray;
// arrays of arrays hold []Value.
//
// The zero Value is invalid (a uint8 with no value); make Values with
// NewValue or get them from File.Lookup. Values are immutable by convention:
// slices returned by Any are shared with the File and must not be modified.
type Value struct {
	Type     ValueType // the value's type
	ElemType ValueType // for Type == ValueArray: the type of the elements
	v        any
}

// Any returns the value as a Go value: uint8, int8, uint16, int16, uint32,
// int32, float32, bool, string, uint64, int64 or float64 for scalars; a typed
// slice ([]uint8 ... []float64, []bool, []string) for arrays of scalars;
// []any (each element's Any) for arrays of arrays. The []string of a string
// array is made on each call (its strings share the array's memory);
// StringArray returns the array itself.
func (v Value) Any() any {
	switch x := v.v.(type) {
	case []Value:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e.Any()
		}
		return out
	case *StringArray:
		return x.Strings()
	}
	return v.v
}

// StringArray returns the value of an array of strings without a copy.
func (v Value) StringArray() (*StringArray, bool) {
	a, ok := v.v.(*StringArray)
	return a, ok
}

// Len returns the number of elements of an array, 0 for other values.
func (v Value) Len() int {
	switch a := v.v.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case *StringArray:
		return a.Len()
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// typeName describes v's type for error messages: "int32", "array of string".
func (v Value) typeName() string {
	if v.Type == ValueArray {
		return "array of " + v.ElemType.String()
	}
	return v.Type.String()
}

// NewValue converts a Go value to a Value. It accepts the Go types that Any
// returns: uint8 ... float64, bool, string; typed slices of those (a
// []string is stored as a StringArray); *StringArray (shared, not copied);
// Value and []Value; and []any whose elements all convert to the same
// value type (nested arrays may differ in element type). Plain int and uint are
// rejected because GGUF readers insist on exact widths (llama.cpp reads
// block counts as uint32): say uint32(2), not 2.
func NewValue(x any) (Value, error) {
	switch x := x.(type) {
	case Value:
		if !x.Type.Known() || (x.Type == ValueArray && !x.ElemType.Known()) || x.v == nil {
			return Value{}, fmt.Errorf("invalid Value (type %v)", x.Type)
		}
		return x, nil
	case uint8:
		return Value{Type: ValueUint8, v: x}, nil
	case int8:
		return Value{Type: ValueInt8, v: x}, nil
	case uint16:
		return Value{Type: ValueUint16, v: x}, nil
	case int16:
		return Value{Type: ValueInt16, v: x}, nil
	case uint32:
		return Value{Type: ValueUint32, v: x}, nil
	case int32:
		return Value{Type: ValueInt32, v: x}, nil
	case float32:
		return Value{Type: ValueFloat32, v: x}, nil
	case bool:
		return Value{Type: ValueBool, v: x}, nil
	case string:
		return Value{Type: ValueString, v: x}, nil
	case uint64:
		return Value{Type: ValueUint64, v: x}, nil
	case int64:
		return Value{Type: ValueInt64, v: x}, nil
	case float64:
		return Value{Type: ValueFloat64, v: x}, nil
	case []uint8:
		return array(ValueUint8, x), nil
	case []int8:
		return array(ValueInt8, x), nil
	case []uint16:
		return array(ValueUint16, x), nil
	case []int16:
		return array(ValueInt16, x), nil
	case []uint32:
		return array(ValueUint32, x), nil
	case []int32:
		return array(ValueInt32, x), nil
	case []float32:
		return array(ValueFloat32, x), nil
	case []bool:
		return array(ValueBool, x), nil
	case []string:
		a, err := NewStringArray(x)
		if err != nil {
			return Value{}, err
		}
		return Value{Type: ValueArray, ElemType: ValueString, v: a}, nil
	case *StringArray:
		if x == nil {
			return Value{}, fmt.Errorf("nil *StringArray")
		}
		return Value{Type: ValueArray, ElemType: ValueString, v: x}, nil
	case []uint64:
		return array(ValueUint64, x), nil
	case []int64:
		return array(ValueInt64, x), nil
	case []float64:
		return array(ValueFloat64, x), nil
	case []Value:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = e
		}
		return newArray(items)
	case []any:
		return newArray(x)
	case int, uint:
		return Value{}, fmt.Errorf("unsupported Go type %T (use a sized type such as uint32 or int64)", x)
	}
	return Value{}, fmt.Errorf("unsupported Go type %T", x)
}

// array wraps a typed slice, copied so later changes by the caller do not
// reach the Value.
func array[E any](et ValueType, s []E) Value {
	return Value{Type: ValueArray, ElemType: et, v: append(make([]E, 0, len(s)), s...)}
}

// newArray converts []any: elements must share one value type. Scalar
// elements are packed into a typed slice; arrays stay []Value.
func newArray(items []any) (Value, error) {
	if len(items) == 0 {
		return Value{}, fmt.Errorf("empty []any has no element type (use a typed slice such as []int32{})")
	}
	vs := make([]Value, len(items))
	for i, it := range items {
		v, err := NewValue(it)
		if err != nil {
			return Value{}, fmt.Errorf("element %d: %w", i, err)
		}
		if i > 0 && v.Type != vs[0].Type {
			return Value{}, fmt.Errorf("element %d is %s, element 0 is %s: GGUF arrays hold one type", i, v.Type, vs[0].Type)
		}
		vs[i] = v
	}
	et := vs[0].Type
	if et == ValueArray {
		return Value{Type: ValueArray, ElemType: ValueArray, v: vs}, nil
	}
	switch et {
	case ValueUint8:
		return packed[uint8](et, vs), nil
	case ValueInt8:
		return packed[int8](et, vs), nil
	case ValueUint16:
		return packed[uint16](et, vs), nil
	case ValueInt16:
		return packed[int16](et, vs), nil
	case ValueUint32:
		return packed[uint32](et, vs), nil
	case ValueInt32:
		return packed[int32](et, vs), nil
	case ValueFloat32:
		return packed[float32](et, vs), nil
	case ValueBool:
		return packed[bool](et, vs), nil
	case ValueString:
		return NewValue(packed[string](et, vs).v)
	case ValueUint64:
		return packed[uint64](et, vs), nil
	case ValueInt64:
		return packed[int64](et, vs), nil
	default: // ValueFloat64
		return packed[float64](et, vs), nil
	}
}

func packed[E any](et ValueType, vs []Value) Value {
	s := make([]E, len(vs))
	for i, v := range vs {
		s[i] = v.v.(E)
	}
	return Value{Type: ValueArray, ElemType: et, v: s}
}

// asInt returns an integer scalar as int64 (ok=false for other types), and
// as uint64 when it is a uint64 beyond math.MaxInt64 (big=true).
func (v Value) asInt() (i int64, u uint64, big, ok bool) {
	switch x := v.v.(type) {
	case uint8:
		return int64(x), 0, false, true
	case int8:
		return int64(x), 0, false, true
	case uint16:
		return int64(x), 0, false, true
	case int16:
		return int64(x), 0, false, true
	case uint32:
		return int64(x), 0, false, true
	case int32:
		return int64(x), 0, false, true
	case int64:
		return x, 0, false, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, x, true, true
		}
		return int64(x), 0, false, true
	}
	return 0, 0, false, false
}
