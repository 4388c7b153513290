package certs

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// errNoKeyPair reports a Secret whose tls.crt and tls.key are missing or do not belong
// together; nothing is written, and the files keep the last good pair.
var errNoKeyPair = errors.New("secret holds no usable tls.crt/tls.key pair")

// The directory layout is the kubelet's for Secret volumes: tls.crt and tls.key are symlinks
// through dataLink, which points at the hidden directory of the current pair.
const (
	dataLink      = "..data"
	versionPrefix = "..pair-"
	certFileMode  = fs.FileMode(0o644)
	keyFileMode   = fs.FileMode(0o600)
	dirMode       = fs.FileMode(0o700)
)

// syncFiles makes tls.crt and tls.key in dir equal to the Secret's data and reports whether
// it wrote. The pair changes in one step, as in a Secret volume: both files go into a new
// hidden directory, the ..data symlink is renamed over to point at it, and the previous
// directory is removed. A reader never sees a certificate with the other one's key, and the
// removal is the event on which controller-runtime's certwatcher reloads the pair.
func syncFiles(dir string, data map[string][]byte) (bool, error) {
	files := map[string][]byte{corev1.TLSCertKey: data[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: data[corev1.TLSPrivateKeyKey]}
	if _, err := tls.X509KeyPair(files[corev1.TLSCertKey], files[corev1.TLSPrivateKeyKey]); err != nil {
		return false, fmt.Errorf("%w: %w", errNoKeyPair, err)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return false, fmt.Errorf("creating the certificate directory: %w", err)
	}
	if holds(dir, files) {
		return false, nil
	}
	version, err := writeVersion(dir, files)
	if err != nil {
		return false, err
	}
	if err := replaceSymlink(dir, dataLink, version); err != nil {
		return false, err
	}
	for name := range files {
		if err := ensureSymlink(dir, name, filepath.Join(dataLink, name)); err != nil {
			return false, err
		}
	}
	return true, removeOldVersions(dir, version)
}

// holds reports whether every file in dir already has the wanted content.
func holds(dir string, files map[string][]byte) bool {
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}

// writeVersion writes the files into a new hidden directory and returns its name.
func writeVersion(dir string, files map[string][]byte) (string, error) {
	version, err := os.MkdirTemp(dir, versionPrefix)
	if err != nil {
		return "", fmt.Errorf("writing the certificate files: %w", err)
	}
	for name, content := range files {
		mode := certFileMode
		if name == corev1.TLSPrivateKeyKey {
			mode = keyFileMode
		}
		if err := os.WriteFile(filepath.Join(version, name), content, mode); err != nil {
			return "", errors.Join(fmt.Errorf("writing the certificate files: %w", err), os.RemoveAll(version))
		}
	}
	return filepath.Base(version), nil
}

// ensureSymlink makes dir/name a symlink to target unless it already is one.
func ensureSymlink(dir, name, target string) error {
	if got, err := os.Readlink(filepath.Join(dir, name)); err == nil && got == target {
		return nil
	}
	return replaceSymlink(dir, name, target)
}

// replaceSymlink points dir/name at target in one rename, whatever dir/name was before.
func replaceSymlink(dir, name, target string) error {
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("linking %s: %w", name, err)
	}
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("linking %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("linking %s: %w", name, err)
	}
	return nil
}

// removeOldVersions deletes the pair directories other than current.
func removeOldVersions(dir, current string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cleaning the certificate directory: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), versionPrefix) && e.Name() != current {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning the certificate directory: %w", err)
	}
	return nil
}
