package install

import "strings"

// Reading a state an install before typed records wrote.

// legacyJobImageKey is where the state format before typed records kept
// the Jobs' image (in After; the nodes were "jobs" After, comma-joined, and
// the manifests directories "manifests" Before and After).
const legacyJobImageKey = "jobs image"

// upgradeLegacy moves the control-plane records of the state format before
// typed records into their typed fields, so revert reads a state an older
// install wrote.
func (ss *stepState) upgradeLegacy() {
	if rec, ok := ss.Records[manifestsRecordKey]; ok && rec.Manifests == nil && (rec.Before != "" || rec.After != "") {
		ss.Records[manifestsRecordKey] = record{Manifests: &manifestsRecord{Dir: rec.Before, BackupDir: rec.After}}
	}
	if rec, ok := ss.Records[jobsRecordKey]; ok && rec.Jobs == nil {
		jobs := &jobsRecord{}
		if rec.After != "" {
			jobs.Nodes = strings.Split(rec.After, ",")
		}
		ss.Records[jobsRecordKey] = record{Jobs: jobs}
	}
	if rec, ok := ss.Records[legacyJobImageKey]; ok {
		if jobs := ss.Records[jobsRecordKey].Jobs; jobs != nil && jobs.Image == "" {
			jobs.Image = rec.After
		}
		delete(ss.Records, legacyJobImageKey)
	}
}
