/* log.h — leveled logging to stderr.
 *
 * Levels: error < warn < info < debug < trace. The level comes from
 * log_set_level() (the CLI's --verbose / --quiet) or the environment variable
 * CTRAIN_LOG=error|warn|info|debug|trace. Progress lines and results go to
 * stdout, not through here.
 */
#ifndef CTRAIN_LOG_H
#define CTRAIN_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG, LOG_TRACE } LogLevel;

void log_set_level(LogLevel l);
LogLevel log_get_level(void);
/* Parse a level name; -1 when unknown. */
int log_parse_level(const char *s);
void log_msg(LogLevel l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_E(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define LOG_W(...) log_msg(LOG_WARN, __VA_ARGS__)
#define LOG_I(...) log_msg(LOG_INFO, __VA_ARGS__)
#define LOG_D(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define LOG_T(...) log_msg(LOG_TRACE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
