package leader

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ReadState returns what the previous run left in the state file at path, or nil if there is
// none (the first run).
func ReadState(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read state file %s: not a readyspan state file: %w", path, err)
	}
	return &r, nil
}

// writeState replaces the state file at path with r; through a rename, so that a crash while
// writing leaves the previous file rather than half a file.
func writeState(path string, r Record) error {
	b, _ := json.Marshal(r)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	return nil
}
