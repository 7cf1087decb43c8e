package analyze

import (
	"context"
	"fmt"
	"slices"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
)

// storedBy says what a statement whose plan's top operator is op stores
// for every node to evaluate later, or evaluates on every node without a
// plan that shows it (ALTER TABLE … ALTER … TYPE … USING): DuckDB's plan
// carries those expressions unbound, so their calls come from the text and
// the definitions of the macros and views it names (Analysis.Stores).
// query is set for CREATE TABLE … AS, whose query the plan binds.
func storedBy(op string, query bool) string {
	switch op {
	case "LOGICAL_CREATE_VIEW":
		return "a view"
	case "LOGICAL_CREATE_MACRO":
		return "a macro"
	case "LOGICAL_CREATE_TRIGGER":
		return "a trigger's action"
	case "LOGICAL_ALTER":
		return "ALTER TABLE"
	case "LOGICAL_CREATE_TABLE":
		if !query {
			return "a column default or generated column"
		}
	}
	return ""
}

// storedByText is storedBy from the text of a statement DuckDB cannot plan
// here: one naming an object created earlier in the same client
// transaction, or ALTER TABLE … ADD COLUMN, which DuckDB 2.0 does not plan
// ("Cannot plan statement of type MULTI").
func storedByText(st sqltext.Statement) string {
	if st.Err() != nil {
		return ""
	}
	verb, v := st.Verb()
	switch verb {
	case "alter":
		return storedBy("LOGICAL_ALTER", false)
	case "create":
	default:
		return ""
	}
	sig := st.Significant()
	for k := v + 1; k < len(sig) && k <= v+5; k++ {
		switch {
		case sig[k].Is("view"):
			return storedBy("LOGICAL_CREATE_VIEW", false)
		case sig[k].Is("macro") || sig[k].Is("function"):
			return storedBy("LOGICAL_CREATE_MACRO", false)
		case sig[k].Is("trigger"):
			return storedBy("LOGICAL_CREATE_TRIGGER", false)
		case sig[k].Is("table"):
			// CREATE TABLE … AS reads rows; a DEFAULT, CHECK or
			// generated column cannot hold a query.
			return storedBy("LOGICAL_CREATE_TABLE", st.ReadsRows())
		}
	}
	return ""
}

// addDefinedCalls adds to an the calls in the definitions of the macros
// and views st names (definedCallsOn), and for a statement that stores
// expressions (an.Stores) the calls of its own text, which its plan does
// not bind.
func (a *Analyzer) addDefinedCalls(ctx context.Context, c *engine.Conn, an *Analysis, st sqltext.Statement) error {
	add := func(name string) {
		if !slices.Contains(an.Calls, name) {
			an.Calls = append(an.Calls, name)
		}
	}
	if an.Stores != "" {
		own, err := bodyCalls(st)
		if err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
		for _, name := range own {
			add(name)
		}
	}
	defined, err := a.definedCallsOn(ctx, c, st)
	if err != nil {
		return err
	}
	for _, d := range defined {
		if an.Via == nil {
			an.Via = map[string]string{}
		}
		if _, ok := an.Via[d.name]; !ok {
			an.Via[d.name] = d.via
		}
		add(d.name)
	}
	return nil
}

// unboundAnalysis is what the leader knows of a statement DuckDB cannot
// bind here: its text's signs of sampling and rowid (TextAnalysis), what
// it stores, and the calls in the definitions of the macros and views it
// names, which exist on the leader whether or not the statement binds.
func (a *Analyzer) unboundAnalysis(ctx context.Context, st sqltext.Statement) (Analysis, error) {
	an := TextAnalysis(st)
	an.Stores = storedByText(st)
	c, err := a.pool.Get()
	if err != nil {
		return Analysis{}, fmt.Errorf("analyze: %w", err)
	}
	defer a.pool.Put(c)
	if err := a.addDefinedCalls(ctx, c, &an, st); err != nil {
		return Analysis{}, err
	}
	return an, nil
}
