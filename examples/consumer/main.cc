// A minimal program built against an installed neardup (find_package): fingerprints two texts,
// indexes one and finds the other within k bits. Exits non-zero if the library answers wrongly.
#include <neardup/fingerprinter.h>
#include <neardup/permuted_index.h>

#include <cstdio>
#include <string>

int main() {
  auto fingerprinter = neardup::Fingerprinter::Create(neardup::FingerprintOptions{});
  if (!fingerprinter.ok()) {
    std::fprintf(stderr, "%s\n", fingerprinter.status().ToString().c_str());
    return 1;
  }
  std::string text;
  for (int i = 0; i < 40; ++i) text += "sentence number " + std::to_string(i) + " of a long page. ";
  auto original = (*fingerprinter)->Compute(text);
  auto edited = (*fingerprinter)->Compute(text + "One more sentence.");
  auto other = (*fingerprinter)->Compute("一段完全不同的中文文本，讲的是别的事情。");
  if (!original.ok() || !edited.ok() || !other.ok()) return 1;

  neardup::PermutedIndexOptions index_options;
  index_options.indexed_k = 6;
  auto index = neardup::PermutedIndex::Create(index_options);
  if (!index.ok()) return 1;
  if (!(*index)->Add(1, *original).ok() || !(*index)->Add(2, *other).ok()) return 1;
  auto hits = (*index)->Search(*edited, 6);
  if (!hits.ok()) return 1;
  std::printf("edited page: %s, distance to original %d, %zu hit(s) within 6 bits\n",
              neardup::ToHex(*edited).c_str(), neardup::HammingDistance(*original, *edited),
              hits->size());
  return hits->size() == 1 && (*hits)[0].id == 1 ? 0 : 1;
}
