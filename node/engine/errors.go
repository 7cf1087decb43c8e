package engine

import (
	"errors"
	"strings"

	bindings "github.com/duckdb/duckdb-go-bindings"
)

// Error is an error reported by DuckDB. Message is DuckDB's full text, for
// example "Catalog Error: Table with name x does not exist!", and Type the
// exception type that prefixes it ("Catalog").
type Error struct {
	Type    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// RawMessage returns the message without DuckDB's "<Type> Error: " prefix, as
// the Quack ERROR_RESPONSE carries it. Errors not from DuckDB are returned
// as their Error text.
func RawMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	if rest, ok := strings.CutPrefix(e.Message, e.Type+" Error: "); ok {
		return rest
	}
	return e.Message
}

// IsInterrupt reports whether err says that DuckDB interrupted the query.
func IsInterrupt(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Type == errorTypeNames[bindings.ErrorTypeInterrupt]
}

// newError builds an Error from DuckDB's message. The type comes from the
// message prefix, because prepare and extract errors carry no error type in
// the C API. Messages without a prefix (the appender's) get one from code,
// unless code is the catch-all ErrorTypeInvalid.
func newError(msg string, code bindings.ErrorType) *Error {
	if msg == "" {
		msg = "unknown DuckDB error"
	}
	if prefix, _, ok := strings.Cut(msg, " Error: "); ok && knownErrorTypes[prefix] {
		return &Error{Type: prefix, Message: msg}
	}
	if code == bindings.ErrorTypeInvalid {
		return &Error{Message: msg}
	}
	name := errorTypeNames[code]
	return &Error{Type: name, Message: name + " Error: " + msg}
}

// errorTypeNames are DuckDB's Exception::ExceptionTypeToString texts, which
// prefix every DuckDB error message.
var errorTypeNames = map[bindings.ErrorType]string{
	bindings.ErrorTypeInvalid:              "Invalid",
	bindings.ErrorTypeOutOfRange:           "Out of Range",
	bindings.ErrorTypeConversion:           "Conversion",
	bindings.ErrorTypeUnknownType:          "Unknown Type",
	bindings.ErrorTypeDecimal:              "Decimal",
	bindings.ErrorTypeMismatchType:         "Mismatch Type",
	bindings.ErrorTypeDivideByZero:         "Divide by Zero",
	bindings.ErrorTypeObjectSize:           "Object Size",
	bindings.ErrorTypeInvalidType:          "Invalid type",
	bindings.ErrorTypeSerialization:        "Serialization",
	bindings.ErrorTypeTransaction:          "TransactionContext",
	bindings.ErrorTypeNotImplemented:       "Not implemented",
	bindings.ErrorTypeExpression:           "Expression",
	bindings.ErrorTypeCatalog:              "Catalog",
	bindings.ErrorTypeParser:               "Parser",
	bindings.ErrorTypePlanner:              "Planner",
	bindings.ErrorTypeScheduler:            "Scheduler",
	bindings.ErrorTypeExecutor:             "Executor",
	bindings.ErrorTypeConstraint:           "Constraint",
	bindings.ErrorTypeIndex:                "Index",
	bindings.ErrorTypeStat:                 "Stat",
	bindings.ErrorTypeConnection:           "Connection",
	bindings.ErrorTypeSyntax:               "Syntax",
	bindings.ErrorTypeSettings:             "Settings",
	bindings.ErrorTypeBinder:               "Binder",
	bindings.ErrorTypeNetwork:              "Network",
	bindings.ErrorTypeOptimizer:            "Optimizer",
	bindings.ErrorTypeNullPointer:          "NullPointer",
	bindings.ErrorTypeErrorIO:              "IO",
	bindings.ErrorTypeInterrupt:            "INTERRUPT",
	bindings.ErrorTypeFatal:                "FATAL",
	bindings.ErrorTypeInternal:             "INTERNAL",
	bindings.ErrorTypeInvalidInput:         "Invalid Input",
	bindings.ErrorTypeOutOfMemory:          "Out of Memory",
	bindings.ErrorTypePermission:           "Permission",
	bindings.ErrorTypeParameterNotResolved: "Parameter Not Resolved",
	bindings.ErrorTypeParameterNotAllowed:  "Parameter Not Allowed",
	bindings.ErrorTypeDependency:           "Dependency",
	bindings.ErrorTypeHTTP:                 "HTTP",
	bindings.ErrorTypeMissingExtension:     "Missing Extension",
	bindings.ErrorTypeAutoload:             "Extension Autoloading",
	bindings.ErrorTypeSequence:             "Sequence",
	bindings.ErrorTypeInvalidConfiguration: "Invalid Configuration",
}

var knownErrorTypes = func() map[string]bool {
	m := make(map[string]bool, len(errorTypeNames))
	for _, name := range errorTypeNames {
		m[name] = true
	}
	return m
}()
