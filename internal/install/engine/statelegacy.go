package engine

import "strings"

// Reading a state an install before typed records wrote.

// legacyJobImageKey is where the state format before typed records kept
// the Jobs' image (in After; the nodes were "jobs" After, comma-joined, and
// the manifests directories "manifests" Before and After).
const legacyJobImageKey = "jobs image"

// upgradeLegacy moves the control-plane records of the state format before
// typed records into their typed fields, so revert reads a state an older
// install wrote.
func (ss *StepState) upgradeLegacy() {
	if rec, ok := ss.Records[ManifestsRecordKey]; ok && rec.Manifests == nil && (rec.Before != "" || rec.After != "") {
		ss.Records[ManifestsRecordKey] = Record{Manifests: &ManifestsRecord{Dir: rec.Before, BackupDir: rec.After}}
	}
	if rec, ok := ss.Records[JobsRecordKey]; ok && rec.Jobs == nil {
		jobs := &JobsRecord{}
		if rec.After != "" {
			jobs.Nodes = strings.Split(rec.After, ",")
		}
		ss.Records[JobsRecordKey] = Record{Jobs: jobs}
	}
	if rec, ok := ss.Records[legacyJobImageKey]; ok {
		if jobs := ss.Records[JobsRecordKey].Jobs; jobs != nil && jobs.Image == "" {
			jobs.Image = rec.After
		}
		delete(ss.Records, legacyJobImageKey)
	}
}
