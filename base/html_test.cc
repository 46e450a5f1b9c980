#include "base/html.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(HtmlEscape, ReplacesEveryMarkupCharacter) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape("plain-id_1.2"), "plain-id_1.2");
}

}  // namespace
}  // namespace tandem
