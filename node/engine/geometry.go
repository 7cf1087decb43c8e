package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxGeometryDepth is DuckDB's Geometry::MAX_RECURSION_DEPTH: its readers
// refuse a GEOMETRYCOLLECTION nested this deep.
const maxGeometryDepth = 16

// Geometry types of WKB.
const (
	geomPoint = 1 + iota
	geomLineString
	geomPolygon
	geomMultiPoint
	geomMultiLineString
	geomMultiPolygon
	geomCollection
)

// checkGeometry checks that b is a GEOMETRY value in DuckDB's internal form,
// the one DuckDB converts every WKB into (Geometry::FromBinary): ISO WKB,
// little-endian throughout, type codes type + 1000·Z + 2000·M and nothing
// after the geometry. A GEOMETRY appended as it is skips that conversion,
// and DuckDB 2.0's readers throw on a malformed value from inside casts
// that may not fail, which invalidates the whole database ("FATAL Error:
// database has been invalidated"): a MULTIPOINT whose part is a LINESTRING
// does it. The rules are those of DuckDB's WKT writer (ToStringRecursive):
// parts of a MULTI* of their one type, Z and M the same in every part,
// collections nested less than 16 deep.
func checkGeometry(b []byte) error {
	g := geometryReader{b: b}
	if err := g.geometry(0, 0, -1); err != nil {
		return fmt.Errorf("malformed GEOMETRY value: %w", err)
	}
	if len(g.b) != 0 {
		return fmt.Errorf("malformed GEOMETRY value: %d bytes after the geometry", len(g.b))
	}
	return nil
}

type geometryReader struct{ b []byte }

func (g *geometryReader) uint32() (uint32, error) {
	if len(g.b) < 4 {
		return 0, errors.New("truncated")
	}
	v := binary.LittleEndian.Uint32(g.b)
	g.b = g.b[4:]
	return v, nil
}

func (g *geometryReader) skip(n uint64) error {
	if n > uint64(len(g.b)) {
		return errors.New("truncated")
	}
	g.b = g.b[n:]
	return nil
}

// geometry reads one geometry at the given collection depth. want is the
// type a MULTI* part must have (0: any); flags are the parent's Z/M flags
// (-1 at the top, where any are allowed).
func (g *geometryReader) geometry(depth int, want uint32, flags int) error {
	if depth >= maxGeometryDepth {
		return fmt.Errorf("nested deeper than %d", maxGeometryDepth)
	}
	if len(g.b) < 1 {
		return errors.New("truncated")
	}
	if g.b[0] != 1 {
		return fmt.Errorf("byte order %d, not little-endian (1)", g.b[0])
	}
	g.b = g.b[1:]
	meta, err := g.uint32()
	if err != nil {
		return err
	}
	typ, flag := meta%1000, meta/1000
	if typ < geomPoint || typ > geomCollection || flag > 3 {
		return fmt.Errorf("unknown geometry type code %d", meta)
	}
	if want != 0 && typ != want {
		return fmt.Errorf("type %d inside a collection of type %d", typ, want+3)
	}
	if flags >= 0 && int(flag) != flags {
		return errors.New("Z/M dimensions differ from the enclosing geometry's")
	}
	vertex := uint64(8 * (2 + flag&1 + flag>>1))
	switch typ {
	case geomPoint:
		return g.skip(vertex)
	case geomLineString:
		n, err := g.uint32()
		if err != nil {
			return err
		}
		return g.skip(uint64(n) * vertex)
	case geomPolygon:
		rings, err := g.uint32()
		if err != nil {
			return err
		}
		for range rings {
			n, err := g.uint32()
			if err != nil {
				return err
			}
			if err := g.skip(uint64(n) * vertex); err != nil {
				return err
			}
		}
		return nil
	}
	parts, err := g.uint32()
	if err != nil {
		return err
	}
	// Every part takes at least 5 bytes, so the loop ends with the input.
	for range parts {
		if typ == geomCollection {
			err = g.geometry(depth+1, 0, int(flag))
		} else {
			err = g.geometry(depth, typ-3, int(flag))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
