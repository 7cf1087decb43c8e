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
	// cause is why the node interrupted the statement (InterruptClients).
	cause error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause of an interrupt the node made, or nil.
func (e *Error) Unwrap() error { return e.cause }

// ExceptionError is an error that names its DuckDB exception type and whose
// Error text is the raw message: a remote node's error, as its Quack
// ERROR_RESPONSE or its node API answer carried them.
type ExceptionError interface {
	error
	ExceptionType() string
}

// RawMessage returns the message without DuckDB's "<Type> Error: " prefix, as
// the Quack ERROR_RESPONSE carries it: of a DuckDB error, or of any other
// error whose text starts with the prefix of one of DuckDB's exception
// types. Other errors are returned as their Error text.
func RawMessage(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		if rest, ok := strings.CutPrefix(e.Message, e.Type+" Error: "); ok {
			return rest
		}
		return e.Message
	}
	if _, ok := errors.AsType[ExceptionError](err); ok {
		return err.Error()
	}
	if _, rest := splitPrefix(err.Error()); rest != "" {
		return rest
	}
	return err.Error()
}

// ExceptionType names err's DuckDB exception type as
// Exception::ExceptionTypeToString does ("Catalog", "Constraint", …), which
// a Q3 ERROR_RESPONSE carries so that a DuckDB 2.0 client raises the same
// exception: the type of a DuckDB error, of an ExceptionError, or of a
// message in DuckDB's form "<Type> Error: …". Other errors have none ("").
func ExceptionType(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Type
	}
	if e, ok := errors.AsType[ExceptionError](err); ok {
		return e.ExceptionType()
	}
	if err == nil {
		return ""
	}
	typ, _ := splitPrefix(err.Error())
	return typ
}

// splitPrefix splits a message in DuckDB's form "<Type> Error: <rest>" for
// one of DuckDB's exception types; otherwise both are "".
func splitPrefix(msg string) (typ, rest string) {
	prefix, rest, ok := strings.Cut(msg, " Error: ")
	if !ok || !knownErrorTypes[prefix] {
		return "", ""
	}
	return prefix, rest
}

// IsCorruption reports whether err is DuckDB finding its database file
// corrupt (a block whose checksum does not match, DuckDB 2.0's Data
// Corruption Error).
func IsCorruption(err error) bool {
	return ExceptionType(err) == errorTypeNames[bindings.ErrorTypeDataCorruption]
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
	if prefix, _ := splitPrefix(msg); prefix != "" {
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
	bindings.ErrorTypeDataCorruption:       "Data Corruption",
}

var knownErrorTypes = func() map[string]bool {
	m := make(map[string]bool, len(errorTypeNames))
	for _, name := range errorTypeNames {
		m[name] = true
	}
	return m
}()
