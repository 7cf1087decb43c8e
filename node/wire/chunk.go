package wire

import (
	"bytes"
	"fmt"
	"math"
)

// defaultMaxDepth bounds the nesting of types and vectors; DuckDB itself has
// no limit, but no real schema comes close and recursion must be bounded.
const defaultMaxDepth = 64

// Limits bounds what a decoder accepts beyond what the input bytes justify.
// Flat vectors are always backed by input bytes; the compressed vector forms
// (constant, dictionary, sequence) are not, so materialising them is charged
// against MaxExpandBytes. A zero field means its default.
type Limits struct {
	// MaxChunkRows bounds the row count of one DataChunk (default 1<<20;
	// DuckDB writes at most 2048).
	MaxChunkRows int
	// MaxVectorRows bounds the rows of any vector, including LIST and ARRAY
	// children (default 1<<26). Both row limits are capped at 1<<32.
	MaxVectorRows int
	// MaxDepth bounds type and vector nesting (default 64).
	MaxDepth int
	// MaxExpandBytes bounds the bytes allocated to materialise compressed
	// vectors in one decode call (default 256 MiB).
	MaxExpandBytes int64
}

// maxRows caps any row limit so that rows times a 16-byte width cannot
// overflow an int.
const maxRows = 1 << 32

func (l Limits) withDefaults() Limits {
	if l.MaxChunkRows <= 0 {
		l.MaxChunkRows = 1 << 20
	}
	if l.MaxVectorRows <= 0 {
		l.MaxVectorRows = 1 << 26
	}
	l.MaxChunkRows = min(l.MaxChunkRows, maxRows)
	l.MaxVectorRows = min(l.MaxVectorRows, maxRows)
	if l.MaxDepth <= 0 {
		l.MaxDepth = defaultMaxDepth
	}
	if l.MaxExpandBytes <= 0 {
		l.MaxExpandBytes = 256 << 20
	}
	return l
}

// AppendDataChunk appends c as a DataChunk object in the layout of
// generation g: flat vectors only, a validity mask only where a row is NULL,
// DuckDB's placeholder values in NULL slots, and VARCHAR-like vectors in the
// list layout for Q1/Q2 or the blob layout for Q3. For DuckDB-produced
// values the output is byte-exact with DuckDB. c is not modified. On error
// dst is returned unchanged.
func AppendDataChunk(dst []byte, c *DataChunk, g Generation) ([]byte, error) {
	if err := checkGeneration(g); err != nil {
		return dst, err
	}
	if c == nil {
		return dst, fmt.Errorf("wire: nil DataChunk: %w", ErrInvalid)
	}
	if c.Rows < 0 || uint64(c.Rows) > math.MaxUint32 {
		return dst, fmt.Errorf("wire: DataChunk with %d rows: %w", c.Rows, ErrInvalid)
	}
	b := appendField(dst, 100)
	b = appendUvarint(b, uint64(c.Rows))
	b = appendField(b, 101)
	b = appendUvarint(b, uint64(len(c.Columns)))
	for i, col := range c.Columns {
		if col == nil {
			return dst, fmt.Errorf("wire: column %d: nil vector: %w", i, ErrInvalid)
		}
		var err error
		if b, err = appendType(b, &col.Type, g, 0); err != nil {
			return dst, fmt.Errorf("wire: column %d: %w", i, err)
		}
	}
	b = appendField(b, 102)
	b = appendUvarint(b, uint64(len(c.Columns)))
	e := vectorEncoder{buf: b, blob: g >= Q3}
	for i, col := range c.Columns {
		if err := e.vector(&col.Type, col, c.Rows, 0); err != nil {
			return dst, fmt.Errorf("wire: column %d: %w", i, err)
		}
	}
	return appendEnd(e.buf), nil
}

// DecodeDataChunk reads one DataChunk object. Both string layouts and all
// vector forms are accepted; constant, dictionary and sequence vectors are
// materialised as flat vectors.
//
// The result aliases r's input: Validity and fixed-width Data always, and
// Bytes of blob-layout strings. Callers that keep the chunk beyond the life
// of the input buffer must not reuse that buffer. Strings in the list
// layout are copied into Offsets/Bytes.
func DecodeDataChunk(r *Reader, lim Limits) (*DataChunk, error) {
	d := newDecoder(r, lim)
	return d.chunk()
}

type decoder struct {
	r      *Reader
	lim    Limits
	budget int64 // bytes left for materialising compressed vectors

	// scan is set by DecodeBodyEncoded: chunks are walked and checked in
	// full but not materialised (see encoded.go), and their bytes are kept
	// in encoded. Vectors returned in this mode carry no values.
	scan    bool
	gen     Generation
	encoded [][]byte
	// want, in scan mode, is the canonical encoding of the result's column
	// types (count first) that every chunk must repeat, and wantTypes
	// those types; nil until the types are known.
	want      []byte
	wantTypes []LogicalType
}

func newDecoder(r *Reader, lim Limits) *decoder {
	lim = lim.withDefaults()
	return &decoder{r: r, lim: lim, budget: lim.MaxExpandBytes}
}

func (d *decoder) chunk() (*DataChunk, error) {
	r := d.r
	if err := r.ExpectField(100); err != nil {
		return nil, err
	}
	rowsOff := r.off
	rows, err := r.ReadUint32()
	if err != nil {
		return nil, err
	}
	if uint64(rows) > uint64(d.lim.MaxChunkRows) {
		return nil, r.errorf(rowsOff, ErrLimit, "DataChunk of %d rows (limit %d)", rows, d.lim.MaxChunkRows)
	}
	if err := r.ExpectField(101); err != nil {
		return nil, err
	}
	types, err := d.chunkTypes()
	if err != nil {
		return nil, err
	}
	n := len(types)
	if err := r.ExpectField(102); err != nil {
		return nil, err
	}
	colsOff := r.off
	m, err := r.ReadCount(5)
	if err != nil {
		return nil, err
	}
	if m != n {
		return nil, r.errorf(colsOff, ErrMalformed, "%d columns for %d types", m, n)
	}
	c := &DataChunk{Rows: int(rows), Columns: make([]*Vector, n)}
	for i := range c.Columns {
		if c.Columns[i], err = d.vector(&types[i], int(rows), 1); err != nil {
			return nil, err
		}
	}
	if err := r.ExpectEnd(); err != nil {
		return nil, err
	}
	return c, nil
}

// chunkTypes reads the column types of a DataChunk. In scan mode they must
// be the result's, byte for byte: a member's chunk whose types differ from
// the answer's header would make a client misread every later byte.
func (d *decoder) chunkTypes() ([]LogicalType, error) {
	r := d.r
	if d.scan && d.want != nil {
		if !bytes.HasPrefix(r.buf[r.off:], d.want) {
			return nil, r.errorf(r.off, ErrMalformed, "DataChunk types differ from the result's")
		}
		r.off += len(d.want)
		return d.wantTypes, nil
	}
	n, err := r.ReadCount(5) // the smallest type is 64 00 xx FF FF
	if err != nil {
		return nil, err
	}
	types := make([]LogicalType, n)
	for i := range types {
		if err := decodeType(r, &types[i], d.lim.MaxDepth); err != nil {
			return nil, err
		}
	}
	return types, nil
}

func checkGeneration(g Generation) error {
	if g < Q1 || g > Q3 {
		return fmt.Errorf("wire: generation %d: %w", g, ErrInvalid)
	}
	return nil
}
