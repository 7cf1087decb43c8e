package hunter

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/testcluster"
)

// digestQuery lists, for every user table and view, a digest each node
// computes over its own copy: a table's row count and order-independent
// row hash, a view's text. Replicas that differ in state differ here in
// the objects that hold the difference.
const digestQuery = `
	SELECT 'table ' || schema_name || '.' || table_name, sql FROM duckdb_tables()
	WHERE NOT temporary AND schema_name NOT LIKE '\_duckraft%' ESCAPE '\'
	UNION ALL
	SELECT 'view ' || schema_name || '.' || view_name, sql FROM duckdb_views()
	WHERE NOT internal AND NOT temporary AND schema_name NOT LIKE '\_duckraft%' ESCAPE '\'`

// diagnose names the objects whose digests differ between the running
// nodes, with each node's digest, and for a table the rows that only some
// nodes hold (a few of them), so that a divergence points at its cause.
// Each node answers from its own copy (duckraft_consistency 'any'); the
// hunt sends nothing meanwhile.
func (h *hunt) diagnose() string {
	ctx, cancel := context.WithTimeout(context.Background(), 4*stmtTimeout)
	defer cancel()
	digests := map[string]map[string]string{} // object -> node -> digest
	rowsOf := map[string]map[string][]string{}
	var nodes []string
	for _, n := range h.running() {
		nodes = append(nodes, n.ID)
		objs, err := nodeDigests(ctx, h, n)
		if err != nil {
			return fmt.Sprintf("diagnosis: %s: %v", n.ID, err)
		}
		for obj, d := range objs {
			if digests[obj] == nil {
				digests[obj] = map[string]string{}
				rowsOf[obj] = map[string][]string{}
			}
			digests[obj][n.ID] = d.digest
			rowsOf[obj][n.ID] = d.rows
		}
	}
	var b strings.Builder
	for _, obj := range sortedKeys(digests) {
		per := digests[obj]
		same := len(per) == len(nodes)
		for _, id := range nodes {
			same = same && per[id] == per[nodes[0]]
		}
		if same {
			continue
		}
		fmt.Fprintf(&b, "  %s differs:\n", obj)
		for _, id := range nodes {
			d, ok := per[id]
			if !ok {
				d = "(missing)"
			}
			fmt.Fprintf(&b, "    %s: %s\n", id, d)
		}
		for _, id := range nodes {
			if only := onlyOn(rowsOf[obj], id, nodes); len(only) > 0 {
				fmt.Fprintf(&b, "    rows only on %s: %s\n", id, strings.Join(only, " | "))
			}
		}
	}
	if b.Len() == 0 {
		return "diagnosis: no table or view differs (the difference is in what the state hash reads besides them)"
	}
	return "diagnosis:\n" + strings.TrimRight(b.String(), "\n")
}

type objectDigest struct {
	digest string
	rows   []string // a table's rows, when it has few
}

// maxShownRows is how many rows a table may have for the diagnosis to
// compare them one by one.
const maxShownRows = 200

func nodeDigests(ctx context.Context, h *hunt, n *testcluster.Node) (map[string]objectDigest, error) {
	c := n.Client(h.t)
	defer c.Close()
	if _, err := c.Exec(ctx, "SET duckraft_consistency = 'any'"); err != nil {
		return nil, err
	}
	list, err := queryStrings(ctx, c, digestQuery)
	if err != nil {
		return nil, err
	}
	out := map[string]objectDigest{}
	for _, row := range list {
		obj, sql := row[0], row[1]
		if !strings.HasPrefix(obj, "table ") {
			out[obj] = objectDigest{digest: sql}
			continue
		}
		name := strings.TrimPrefix(obj, "table ")
		qualified := quoteQualified(name)
		sum, err := queryStrings(ctx, c, "SELECT count(*)::VARCHAR, coalesce(sum(hash(r)::HUGEINT), 0)::VARCHAR FROM "+qualified+" r")
		if err != nil {
			return nil, err
		}
		d := objectDigest{digest: fmt.Sprintf("%s rows, hash %s; %s", sum[0][0], sum[0][1], sql)}
		if count, err := strconv.Atoi(sum[0][0]); err == nil && count <= maxShownRows {
			rows, err := queryStrings(ctx, c, fmt.Sprintf("SELECT CAST(r AS VARCHAR) FROM %s r ORDER BY ALL LIMIT %d", qualified, maxShownRows))
			if err == nil {
				for _, r := range rows {
					d.rows = append(d.rows, r[0])
				}
			}
		}
		out[obj] = d
	}
	return out, nil
}

// onlyOn returns up to five of id's rows that some other node lacks.
func onlyOn(rows map[string][]string, id string, nodes []string) []string {
	var out []string
	for _, r := range rows[id] {
		for _, other := range nodes {
			if other != id && !slices.Contains(rows[other], r) {
				out = append(out, r)
				break
			}
		}
		if len(out) == 5 {
			break
		}
	}
	return out
}

func quoteQualified(name string) string {
	schema, table, _ := strings.Cut(name, ".")
	return sqlquote.Ident(schema) + "." + sqlquote.Ident(table)
}

// queryStrings returns every row sql yields on c, each value as text.
func queryStrings(ctx context.Context, c *client.Conn, sql string) ([][]string, error) {
	rows, err := queryRows(ctx, c, sql)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sql, err)
	}
	out := make([][]string, len(rows))
	for i, v := range rows {
		out[i] = make([]string, len(v))
		for j, x := range v {
			out[i][j] = fmt.Sprint(x)
		}
	}
	return out, nil
}
