// Jenkins lookup3 hashlittle2: Bob Jenkins' public-domain 2006 hash, written from the algorithm.
//
// Internal header. Pure functions, safe from any thread. JenkinsLookup3Hash64 is the feature hash
// of the C++ SimHash library yanyiwu/simhash (hashlittle2 with both seeds 0, c in the high half).
#ifndef NEARDUP_FINGERPRINT_JENKINS_LOOKUP3_H_
#define NEARDUP_FINGERPRINT_JENKINS_LOOKUP3_H_

#include <cstdint>
#include <string_view>

namespace neardup {

// lookup3.c hashlittle2(key, length, pc, pb): on entry *primary_seed (pc) and *secondary_seed (pb)
// seed the hash; on return *primary_seed holds c and *secondary_seed holds b. Results are those
// of lookup3.c on a little-endian machine, whatever the alignment of `bytes`.
void JenkinsHashLittle2(std::string_view bytes, uint32_t* primary_seed, uint32_t* secondary_seed);

// hashlittle2 with seeds 0 and 0, returned as ((uint64_t)c << 32) | b.
uint64_t JenkinsLookup3Hash64(std::string_view bytes);

}  // namespace neardup

#endif  // NEARDUP_FINGERPRINT_JENKINS_LOOKUP3_H_
