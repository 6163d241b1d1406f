// The 128-bit key hasher behind the schedule cache's keys and the disk cache's files.
#include "ir/key_hasher.hpp"

#include <doctest/doctest.h>

using namespace loom;

TEST_CASE("KeyHasher: every word, text and arg moves both lanes") {
  const auto k0 = KeyHasher().key();
  const auto k1 = KeyHasher().word(1).key();
  CHECK(k1.a != k0.a);
  CHECK(k1.b != k0.b);
  CHECK(KeyHasher().text("ab").key() != KeyHasher().text("ba").key());
  CHECK(KeyHasher().text("").key() != KeyHasher().text(std::string(1, '\0')).key());
  CHECK(KeyHasher().arg(int64_t{1}).key() != KeyHasher().arg(1.0).key());
  CHECK(KeyHasher().arg(std::vector<int64_t>{1, 2}).key() !=
        KeyHasher().arg(std::vector<int64_t>{2, 1}).key());
}

TEST_CASE("Key128::hex is 32 hex digits, lane a first") {
  CHECK(Key128{0x1, 0xabcdef}.hex() == "000000000000000100000000" "00abcdef");
}
