package wire

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
)

// Text renders row i as DuckDB's CAST(… AS VARCHAR) does, which is what
// DuckDB's CLI prints; a NULL row is "NULL" (check IsValid to tell it from
// the string 'NULL').
func (v *Vector) Text(i int) (string, error) {
	val, err := v.Value(i)
	if err != nil {
		return "", err
	}
	return FormatValue(v.Type, val)
}

// FormatValue renders a value of type t, in the Go form Vector.Value
// returns, as DuckDB's CAST(… AS VARCHAR) does; nil is "NULL". Nested
// values follow DuckDB's rules: "[1, NULL]", "{'a': 1, 'b': x}",
// "{k=v}", with scalar strings inside them quoted only when they contain
// characters that would make the text ambiguous.
func FormatValue(t LogicalType, v any) (string, error) {
	b, err := AppendValue(nil, t, v)
	return string(b), err
}

// AppendValue is FormatValue appending to dst, for callers that render many
// values into one buffer.
func AppendValue(dst []byte, t LogicalType, v any) ([]byte, error) {
	if v == nil {
		return append(dst, "NULL"...), nil
	}
	switch t.ID {
	case TypeList, TypeArray:
		return appendListText(dst, t, v)
	case TypeStruct, TypeTuple:
		return appendStructText(dst, t, v)
	case TypeMap:
		return appendMapText(dst, t, v)
	case TypeUnion:
		u, ok := v.(Union)
		if !ok {
			return dst, mismatch(t, v)
		}
		for _, f := range t.Fields[1:] {
			if f.Name == u.Tag {
				return AppendValue(dst, f.Type, u.Value)
			}
		}
		return dst, fmt.Errorf("%s has no member %q", t.String(), u.Tag)
	}
	return appendScalarText(dst, t, v)
}

// appendScalarText renders a value of a non-nested type.
func appendScalarText(dst []byte, t LogicalType, v any) ([]byte, error) {
	switch x := v.(type) {
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case *big.Int:
		return x.Append(dst, 10), nil
	case float32:
		return appendFloatText(dst, float64(x), 32), nil
	case float64:
		return appendFloatText(dst, x, 64), nil
	case Decimal:
		return appendDecimal(dst, x), nil
	case string:
		return append(dst, x...), nil
	case []byte:
		if t.ID == TypeGeometry {
			return dst, fmt.Errorf("rendering GEOMETRY as text (WKT) is not supported")
		}
		return appendBlobText(dst, x), nil
	case Bit:
		return append(dst, x...), nil
	case Infinity:
		return append(dst, x.String()...), nil
	case time.Time:
		switch t.ID {
		case TypeDate:
			return appendDate(dst, x), nil
		case TypeTimestampTZ, TypeTimestampTZNS:
			return append(appendTimestamp(dst, x.UTC()), "+00"...), nil
		}
		return appendTimestamp(dst, x.UTC()), nil
	case time.Duration:
		return appendTimeOfDay(dst, int64(x)), nil
	case TimeTZ:
		return appendTimeTZ(dst, x), nil
	case Interval:
		return appendInterval(dst, x), nil
	case UUID:
		return appendUUID(dst, x), nil
	}
	return dst, mismatch(t, v)
}

func mismatch(t LogicalType, v any) error {
	return fmt.Errorf("cannot render %T as %s", v, t.String())
}

// isNestedType reports whether DuckDB treats t as nested when casting a
// containing value to VARCHAR: nested children are embedded verbatim,
// scalar ones are quoted when needed.
func isNestedType(t LogicalType) bool {
	switch t.ID {
	case TypeStruct, TypeTuple, TypeUnion, TypeVariant, TypeList, TypeMap, TypeArray:
		return true
	}
	return false
}

// appendListText renders a LIST or ARRAY as "[e1, e2, …]". Scalar LIST
// elements are quoted when needed; ARRAY elements never are (DuckDB's
// ARRAY cast does not escape).
func appendListText(dst []byte, t LogicalType, v any) ([]byte, error) {
	elems, ok := v.([]any)
	if !ok || t.Child == nil {
		return dst, mismatch(t, v)
	}
	escape := t.ID == TypeList && !isNestedType(*t.Child)
	dst = append(dst, '[')
	for k, e := range elems {
		if k > 0 {
			dst = append(dst, ", "...)
		}
		var err error
		if dst, err = appendChildText(dst, *t.Child, e, escape); err != nil {
			return dst, fmt.Errorf("element %d: %w", k, err)
		}
	}
	return append(dst, ']'), nil
}

// appendStructText renders a STRUCT as "{'name': value, …}", or an
// unnamed one (first field name empty) as "(value, …)".
func appendStructText(dst []byte, t LogicalType, v any) ([]byte, error) {
	s, ok := v.(Struct)
	if !ok || len(s) != len(t.Fields) {
		return dst, mismatch(t, v)
	}
	unnamed := len(t.Fields) > 0 && t.Fields[0].Name == ""
	if unnamed {
		dst = append(dst, '(')
	} else {
		dst = append(dst, '{')
	}
	for k, f := range t.Fields {
		if k > 0 {
			dst = append(dst, ", "...)
		}
		if !unnamed {
			dst = appendQuoted(dst, f.Name)
			dst = append(dst, ": "...)
		}
		var err error
		if dst, err = appendChildText(dst, f.Type, s[k].Value, !isNestedType(f.Type)); err != nil {
			return dst, fmt.Errorf("field %q: %w", f.Name, err)
		}
	}
	if unnamed {
		return append(dst, ')'), nil
	}
	return append(dst, '}'), nil
}

// appendMapText renders a MAP as "{key=value, …}".
func appendMapText(dst []byte, t LogicalType, v any) ([]byte, error) {
	entries, ok := v.([]MapEntry)
	if !ok || t.Child == nil || len(t.Child.Fields) != 2 {
		return dst, mismatch(t, v)
	}
	kt, vt := t.Child.Fields[0].Type, t.Child.Fields[1].Type
	dst = append(dst, '{')
	for k, e := range entries {
		if k > 0 {
			dst = append(dst, ", "...)
		}
		var err error
		if e.Key == nil {
			// DuckDB prints a NULL entry (or NULL key) this way; neither
			// can be created through SQL.
			dst = append(dst, "NULL"...)
			continue
		}
		if dst, err = appendChildText(dst, kt, e.Key, !isNestedType(kt)); err != nil {
			return dst, fmt.Errorf("key %d: %w", k, err)
		}
		dst = append(dst, '=')
		if dst, err = appendChildText(dst, vt, e.Value, !isNestedType(vt)); err != nil {
			return dst, fmt.Errorf("value %d: %w", k, err)
		}
	}
	return append(dst, '}'), nil
}

// appendChildText renders one value inside a nested value: NULL as NULL,
// and, when escape is set, quoted if its text needs it.
func appendChildText(dst []byte, t LogicalType, v any, escape bool) ([]byte, error) {
	if v == nil {
		return append(dst, "NULL"...), nil
	}
	if !escape {
		return AppendValue(dst, t, v)
	}
	start := len(dst)
	dst, err := AppendValue(dst, t, v)
	if err != nil || !needsQuotes(dst[start:]) {
		return dst, err
	}
	text := string(dst[start:])
	return appendQuoted(dst[:start], text), nil
}

// needsQuotes is DuckDB's test for quoting a scalar inside a nested value:
// empty, leading or trailing whitespace, the word null in any case, or one
// of the characters that delimit nested text.
func needsQuotes(s []byte) bool {
	if len(s) == 0 || isSpace(s[0]) || isSpace(s[len(s)-1]) {
		return true
	}
	if len(s) == 4 && (s[0]|0x20) == 'n' && (s[1]|0x20) == 'u' && (s[2]|0x20) == 'l' && (s[3]|0x20) == 'l' {
		return true
	}
	for _, c := range s {
		switch c {
		case '"', '\'', '(', ')', ',', ':', '=', '[', ']', '{', '}':
			return true
		}
	}
	return false
}

// isSpace is DuckDB's StringUtil::CharacterIsSpace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// appendQuoted writes s in single quotes with ' and \ backslash-escaped,
// as DuckDB quotes struct keys and ambiguous nested strings.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '\'')
	for k := 0; k < len(s); k++ {
		if s[k] == '\'' || s[k] == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, s[k])
	}
	return append(dst, '\'')
}

// appendFloatText renders a FLOAT (bits 32) or DOUBLE as DuckDB does
// (fmt's "{}"): the shortest digits that round-trip, in fixed notation
// with at least one fraction digit when the decimal exponent is in
// [-4, 16), else as d[.ddd]e±XX.
//
// One known difference remains for FLOAT: for a small share of values
// (about 2% of random ones) the Grisu algorithm in DuckDB's bundled fmt
// gives up and its fallback prints the shortest digits of the value widened
// to double, e.g. "3390695.25" where this prints "3390695.2". Both parse
// back to the same float32.
func appendFloatText(dst []byte, f float64, bits int) []byte {
	if math.Signbit(f) {
		dst = append(dst, '-')
		f = -f
	}
	switch {
	case math.IsNaN(f):
		return append(dst, "nan"...)
	case math.IsInf(f, 0):
		return append(dst, "inf"...)
	}
	var buf [32]byte
	// "d.ddde±XX": the digits and the exponent of the first one.
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, bits)
	epos := len(s) - 1
	for s[epos] != 'e' {
		epos--
	}
	exp, _ := strconv.Atoi(string(s[epos+1:]))
	digits := make([]byte, 0, 20)
	digits = append(digits, s[0])
	if epos > 1 {
		digits = append(digits, s[2:epos]...)
	}
	n := len(digits)
	if exp < -4 || exp >= 16 {
		dst = append(dst, digits[0])
		if n > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	intDigits := exp + 1
	switch {
	case n <= intDigits:
		dst = append(dst, digits...)
		for range intDigits - n {
			dst = append(dst, '0')
		}
		return append(dst, ".0"...)
	case intDigits > 0:
		dst = append(dst, digits[:intDigits]...)
		dst = append(dst, '.')
		return append(dst, digits[intDigits:]...)
	default:
		dst = append(dst, "0."...)
		for range -intDigits {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
}

// appendDecimal renders d with exactly Scale fraction digits. Like DuckDB
// it puts a "0" before the point of a value below one only when the type
// has integer digits (Width > Scale): DECIMAL(5,5) prints ".00001".
func appendDecimal(dst []byte, d Decimal) []byte {
	unscaled := d.Value
	if unscaled == nil {
		unscaled = new(big.Int)
	}
	digits := new(big.Int).Abs(unscaled).Append(nil, 10)
	if unscaled.Sign() < 0 {
		dst = append(dst, '-')
	}
	if d.Scale == 0 {
		return append(dst, digits...)
	}
	s := int(d.Scale)
	if len(digits) > s {
		dst = append(dst, digits[:len(digits)-s]...)
	} else if d.Width > d.Scale {
		dst = append(dst, '0')
	}
	dst = append(dst, '.')
	for range s - len(digits) {
		dst = append(dst, '0')
	}
	return append(dst, digits[max(0, len(digits)-s):]...)
}

// appendBlobText renders bytes as DuckDB's BLOB text: printable ASCII
// other than \, ' and " as is, everything else as \xHH.
func appendBlobText(dst []byte, b []byte) []byte {
	const hexDigits = "0123456789ABCDEF"
	for _, c := range b {
		if c >= 32 && c <= 126 && c != '\\' && c != '\'' && c != '"' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
	}
	return dst
}

// appendDate renders the calendar date of t as YYYY-MM-DD, years before 1
// as the positive BC year with a " (BC)" suffix, as DuckDB does.
func appendDate(dst []byte, t time.Time) []byte {
	year, month, day := t.Date()
	bc := year <= 0
	if bc {
		year = -year + 1
	}
	for p := 1000; p > 1 && year < p; p /= 10 {
		dst = append(dst, '0')
	}
	dst = strconv.AppendInt(dst, int64(year), 10)
	dst = append(dst, '-')
	dst = appendTwoDigits(dst, int(month))
	dst = append(dst, '-')
	dst = appendTwoDigits(dst, day)
	if bc {
		dst = append(dst, " (BC)"...)
	}
	return dst
}

// appendTimestamp renders t as "YYYY-MM-DD HH:MM:SS[.fraction]" with the
// fraction's trailing zeros dropped.
func appendTimestamp(dst []byte, t time.Time) []byte {
	dst = appendDate(dst, t)
	dst = append(dst, ' ')
	hour, minute, second := t.Clock()
	return appendClock(dst, int64(hour), minute, second, t.Nanosecond())
}

// appendTimeOfDay renders nanoseconds since midnight as
// "HH:MM:SS[.fraction]".
func appendTimeOfDay(dst []byte, nanos int64) []byte {
	secs := nanos / 1e9
	return appendClock(dst, secs/3600, int(secs/60%60), int(secs%60), int(nanos%1e9))
}

// appendClock writes HH:MM:SS and, when nanos is not zero, a point and the
// nine-digit fraction without its trailing zeros (DuckDB prints up to six
// digits for microsecond types, nine for nanosecond ones, the same way).
func appendClock(dst []byte, hour int64, minute, second, nanos int) []byte {
	if hour < 10 {
		dst = append(dst, '0')
	}
	dst = strconv.AppendInt(dst, hour, 10)
	dst = append(dst, ':')
	dst = appendTwoDigits(dst, minute)
	dst = append(dst, ':')
	dst = appendTwoDigits(dst, second)
	if nanos == 0 {
		return dst
	}
	var frac [9]byte
	n := len(frac)
	for k := n - 1; k >= 0; k-- {
		frac[k] = byte('0' + nanos%10)
		nanos /= 10
	}
	for frac[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, frac[:n]...)
}

func appendTwoDigits(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/10), byte('0'+v%10))
}

// appendTimeTZ renders t as DuckDB does: the time of day, then the offset
// as ±HH, with :MM and :SS only when not zero.
func appendTimeTZ(dst []byte, t TimeTZ) []byte {
	dst = appendTimeOfDay(dst, t.Micros*1000)
	off := int(t.OffsetSeconds)
	if off < 0 {
		dst = append(dst, '-')
		off = -off
	} else {
		dst = append(dst, '+')
	}
	dst = appendTwoDigits(dst, off/3600)
	if m := off / 60 % 60; m != 0 {
		dst = appendTwoDigits(append(dst, ':'), m)
	}
	if s := off % 60; s != 0 {
		dst = appendTwoDigits(append(dst, ':'), s)
	}
	return dst
}

// appendInterval renders an INTERVAL as DuckDB does: non-zero years,
// months and days as "N unit(s)", then the time part as [-]HH:MM:SS[.f];
// an all-zero interval is "00:00:00".
func appendInterval(dst []byte, iv Interval) []byte {
	start := len(dst)
	part := func(n int32, unit string) {
		if n == 0 {
			return
		}
		if len(dst) > start {
			dst = append(dst, ' ')
		}
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, ' ')
		dst = append(dst, unit...)
		if n != 1 && n != -1 {
			dst = append(dst, 's')
		}
	}
	part(iv.Months/12, "year")
	part(iv.Months%12, "month")
	part(iv.Days, "day")
	if iv.Micros == 0 {
		if len(dst) == start {
			dst = append(dst, "00:00:00"...)
		}
		return dst
	}
	if len(dst) > start {
		dst = append(dst, ' ')
	}
	// Work on the negated magnitude so that the minimum int64 is safe.
	micros := iv.Micros
	if micros < 0 {
		dst = append(dst, '-')
	} else {
		micros = -micros
	}
	const microsPerHour, microsPerMinute, microsPerSecond = 3600e6, 60e6, 1e6
	hour := -(micros / microsPerHour)
	micros += hour * microsPerHour
	minute := -(micros / microsPerMinute)
	micros += minute * microsPerMinute
	second := -(micros / microsPerSecond)
	micros += second * microsPerSecond
	return appendClock(dst, hour, int(minute), int(second), int(-micros)*1000)
}
