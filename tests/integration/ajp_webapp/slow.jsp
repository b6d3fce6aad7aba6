<%@ page contentType="text/plain" trimDirectiveWhitespaces="true" %>
<% Thread.sleep(4); %>
slow page: 4 ms
