/* ui_assets.h -- the status page's files, embedded at build time
 * (api/ui/gen-assets.sh makes $(BUILD)/ui_assets.c from api/ui/). */
#ifndef DLOCKD_UI_ASSETS_H
#define DLOCKD_UI_ASSETS_H

#include <stddef.h>

struct ui_asset {
	const char *path;		/* "/ui", "/ui/app.js" */
	const char *content_type;
	const char *data;		/* lives as long as the process */
	size_t len;
	const char *etag;		/* quoted, strong: "\"3fa9...\"" */
};

extern const struct ui_asset ui_assets[];
extern const size_t ui_assets_count;

#endif
