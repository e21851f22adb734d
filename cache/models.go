package cache

import (
	"encoding/json"
	"strings"
)

// ModelsGroup holds, per model sha256, the file name and path it was last
// scored from, so that ppl-cache can show "score/<sha256>" groups by name
// and prune them by name or path.
const ModelsGroup = "models"

// ModelInfo is what the cache remembers of a scored model.
type ModelInfo struct {
	SHA256 string `json:"sha256"`
	Name   string `json:"name"` // the file's base name
	Path   string `json:"path"` // absolute
	// GeneralName is the GGUF general.name, when the file has one.
	GeneralName string `json:"general_name,omitempty"`
}

func modelKey(sha string) string { return Key("model-name", strings.ToLower(sha)) }

// RememberModel records a model's names under its sha256.
func (c *Cache) RememberModel(m ModelInfo) error {
	if c == nil {
		return nil
	}
	if old, ok := c.Model(m.SHA256); ok && old == m {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return c.Put(ModelsGroup, modelKey(m.SHA256), b)
}

// Model returns what RememberModel recorded for sha.
func (c *Cache) Model(sha string) (ModelInfo, bool) {
	var m ModelInfo
	if c == nil {
		return m, false
	}
	b, ok, err := c.Get(ModelsGroup, modelKey(sha))
	if err != nil || !ok || json.Unmarshal(b, &m) != nil || m.SHA256 != sha {
		return ModelInfo{}, false
	}
	return m, true
}
