package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTheDemoChecksTheSecretReachedGitEncrypted(t *testing.T) {
	const encrypted = "apiVersion: v1\nkind: Secret\ndata:\n  password: ENC[AES256_GCM,data:bKY9sCiLUog=,type:str]\nsops:\n  version: 3.13.3\n"
	for _, tc := range []struct{ name, content, wantErr string }{
		{"passes a SOPS file with the value encrypted", encrypted, ""},
		{"fails the value in plaintext", "data:\n  password: s3cret\nsops:\n", "plaintext"},
		{"fails the value as the API server stores it, in base64", "data:\n  password: czNjcmV0\nsops:\n", "plaintext"},
		{"fails a file that is not a SOPS file", "data:\n  password: ENC[x]\n", "not a SOPS file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEncrypted(tc.content, demoPassword)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}
