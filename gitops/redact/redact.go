// Package redact keeps the values of a Secret the operator writes out of the API server's
// answer to that write: an admission webhook or a ValidatingAdmissionPolicy refusing it may
// quote the object in its message, and that message reaches conditions, logs, Events and
// admission denials.
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// minValue is the shortest form of a value SecretValues looks for: a shorter one (a
// comment's word, a digit) would cut ordinary words out of the message, and is no key.
const minValue = 8

// Hidden is what SecretValues puts in place of a value.
const Hidden = "[value hidden]"

// SecretValues returns err, the API server's answer to a write of a Secret holding data,
// with each of data's values left out of its message. A value is looked for as it is,
// base64-encoded (as JSON carries it), escaped as a JSON or Go string (a policy quoting
// the object's last-applied-configuration annotation, where kubectl writes "&" as
// "\u0026") and line by line (an identity file's key line). errors.Is and As still see
// err.
func SecretValues(err error, data map[string][]byte) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, v := range data {
		forms := append([]string{string(v), base64.StdEncoding.EncodeToString(v)}, escaped(string(v))...)
		forms = append(forms, strings.Split(string(v), "\n")...)
		for _, f := range forms {
			if len(strings.TrimSpace(f)) >= minValue {
				msg = strings.ReplaceAll(msg, f, Hidden)
			}
		}
	}
	if msg == err.Error() {
		return err
	}
	return &hiddenValues{msg: msg, err: err}
}

// escaped is v as a JSON string carries it, with and without HTML escaping, and as a Go
// string literal, each without its quotes.
func escaped(v string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) == nil {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(b.String()), `"`)[1:])
		}
	}
	quoted := strconv.Quote(v)
	return append(out, quoted[1:len(quoted)-1])
}

// hiddenValues is an error whose message leaves out the values it could quote.
type hiddenValues struct {
	msg string
	err error
}

func (e *hiddenValues) Error() string { return e.msg }
func (e *hiddenValues) Unwrap() error { return e.err }
