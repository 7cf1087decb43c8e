package sqltext

import "strings"

// Setting is a SET or RESET statement as its words say it:
//
//	SET [GLOBAL | SESSION | LOCAL] name [= | TO] value [;]
//	RESET [GLOBAL | SESSION | LOCAL] name [;]
//
// Classification (which settings a client may change), routing (the
// settings the router keeps itself, those a session replays elsewhere)
// and the access guard (settings whose value names schemas) all read a
// setting through it.
type Setting struct {
	// Reset is set for RESET, clear for SET.
	Reset bool
	// Scope is the scope written after the verb, lower-cased: "global",
	// "session" or "local"; "" when none is written.
	Scope string
	// Name is the token after the scope: the setting's name in a well
	// formed statement (Name.Name() unquotes a quoted one), the first
	// part of a qualified one, or the zero Token when the statement ends
	// before it.
	Name Token
	// Qualified is set when a dot follows Name: the name is an
	// extension's namespace and more.
	Qualified bool
	// Assign is the = or TO after the name, or the zero Token.
	Assign Token
	// Value is the significant tokens after the name and Assign, without
	// one semicolon that ends the statement.
	Value []Token
}

// Setting reads the statement as a SET or RESET; ok is false for any
// other statement.
func (s Statement) Setting() (Setting, bool) { return ReadSetting(s.sig) }

// ReadSetting is Statement.Setting on the significant tokens of one
// statement, for callers that split a text's tokens themselves.
func ReadSetting(sig []Token) (Setting, bool) {
	var set Setting
	switch {
	case len(sig) > 0 && sig[0].Is("set"):
	case len(sig) > 0 && sig[0].Is("reset"):
		set.Reset = true
	default:
		return Setting{}, false
	}
	k := 1
	if k < len(sig) && (sig[k].Is("global") || sig[k].Is("session") || sig[k].Is("local")) {
		set.Scope = strings.ToLower(sig[k].Text)
		k++
	}
	if k >= len(sig) {
		return set, true
	}
	set.Name = sig[k]
	k++
	set.Qualified = k < len(sig) && sig[k].IsPunct('.')
	if k < len(sig) && (sig[k].Kind == TokOp && sig[k].Text == "=" || sig[k].Is("to")) {
		set.Assign = sig[k]
		k++
	}
	set.Value = sig[k:]
	if n := len(set.Value); n > 0 && set.Value[n-1].IsPunct(';') {
		set.Value = set.Value[:n-1]
	}
	return set, true
}
