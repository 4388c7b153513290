// Package redact keeps the values of a Secret the operator writes out of the API server's
// answer to that write: an admission webhook or a ValidatingAdmissionPolicy refusing it may
// quote the object in its message, and that message reaches conditions, logs, Events and
// admission denials.
package redact

import (
	"encoding/base64"
	"strings"
)

// minValue is the shortest form of a value SecretValues looks for: a shorter one (a
// comment's word, a digit) would cut ordinary words out of the message, and is no key.
const minValue = 8

// Hidden is what SecretValues puts in place of a value.
const Hidden = "[value hidden]"

// SecretValues returns err, the API server's answer to a write of a Secret holding data,
// with each of data's values left out of its message. A value is looked for as it is,
// base64-encoded (as JSON carries it) and line by line (an identity file's key line).
// errors.Is and As still see err.
func SecretValues(err error, data map[string][]byte) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, v := range data {
		forms := append([]string{string(v), base64.StdEncoding.EncodeToString(v)}, strings.Split(string(v), "\n")...)
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

// hiddenValues is an error whose message leaves out the values it could quote.
type hiddenValues struct {
	msg string
	err error
}

func (e *hiddenValues) Error() string { return e.msg }
func (e *hiddenValues) Unwrap() error { return e.err }
